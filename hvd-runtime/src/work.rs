//! What a rank submitted for one operation, typed by what its caller gets back: the
//! caller's tensor and the slot its result goes to, or the slot of a control operation.
//!
//! The engine reaches tensors through [`AnyBuffer`] and completes them through these
//! types, so a result always has the caller's type: nothing is downcast on the way back.

use std::sync::Arc;

use hvd_core::{Device, Error, Result};

use super::buffer::{AnyBuffer, Buffer};
use super::completion::Completion;

/// Runs process-set changes for the global set's engine.
pub(crate) trait SetRegistry: Send + Sync {
    /// Creates a process set of `members` (global ranks) from the global stack; returns
    /// its id.
    fn add(&self, members: &[usize]) -> Result<usize>;
    /// Removes process set `id`.
    fn remove(&self, id: usize) -> Result<()>;
}

/// Where one submitted operation's result goes, in the three families the engine runs
/// differently. The operation itself is the request's [`Op`](super::request::Op): the
/// engine runs what the ranks agreed (the plan's), so nothing here repeats it.
pub(crate) enum Work {
    /// Allreduce, broadcast and Adasum: batched, on the caller's tensor.
    InPlace(Box<dyn InPlace>),
    /// Allgather, alltoall and reducescatter: one at a time, into a new tensor.
    Resized(Box<dyn Resized>),
    /// Barrier, join and process-set changes: no tensor, run by the engine itself.
    Control(Control),
}

pub(crate) enum Control {
    Barrier(Completion<()>),
    /// Answers the last rank to join.
    Join(Completion<usize>),
    /// Answers the new set's id.
    AddProcessSet {
        registry: Arc<dyn SetRegistry>,
        slot: Completion<usize>,
    },
    RemoveProcessSet {
        registry: Arc<dyn SetRegistry>,
        slot: Completion<()>,
    },
}

impl Work {
    /// The caller's tensor, when the operation reduces or overwrites it in place on the
    /// host.
    pub fn host_bytes(&mut self) -> Option<&mut [u8]> {
        match self {
            Work::InPlace(tensor) => {
                let buffer = tensor.buffer();
                (buffer.device() == Device::Cpu).then(|| buffer.bytes_mut())
            }
            _ => None,
        }
    }

    /// Fails the operation with `err`.
    pub fn fail(self, err: Error) {
        match self {
            Work::InPlace(tensor) => tensor.finish(Err(err)),
            Work::Resized(tensor) => tensor.fail(err),
            Work::Control(Control::Barrier(slot) | Control::RemoveProcessSet { slot, .. }) => {
                slot.complete(Err(err))
            }
            Work::Control(Control::Join(slot) | Control::AddProcessSet { slot, .. }) => {
                slot.complete(Err(err))
            }
        }
    }
}

/// A caller's tensor that the operation reduces or overwrites where it is, or (an
/// out-of-place allreduce of device tensors) a tensor it reads and one it writes.
pub(crate) trait InPlace: Send {
    /// The tensor the result goes to, and the one the operation reads when that is
    /// another.
    fn buffers(&mut self) -> (&mut dyn AnyBuffer, Option<&dyn AnyBuffer>);
    fn buffer(&mut self) -> &mut dyn AnyBuffer {
        self.buffers().0
    }
    /// Hands the tensor back, or the error.
    fn finish(self: Box<Self>, result: Result<()>);
}

/// A caller's tensor that the operation reads, writing its result into a new tensor of
/// the same kind.
pub(crate) trait Resized: Send {
    /// Makes a zeroed result of `shape`, runs `op` from the input into it, and hands the
    /// result back (with `received`, the rows from each rank, where the caller asked for
    /// them), or the error, which is also returned.
    fn run(
        self: Box<Self>,
        shape: &[usize],
        received: Vec<usize>,
        op: &mut dyn FnMut(&dyn AnyBuffer, &mut dyn AnyBuffer) -> Result<()>,
    ) -> Result<()>;
    fn fail(self: Box<Self>, err: Error);
}

/// A tensor of type `B` and the slot its result of type `T` goes to.
pub(crate) struct Returns<B, T> {
    tensor: B,
    slot: Completion<T>,
}

impl<B, T> Returns<B, T> {
    pub fn new(tensor: B, slot: Completion<T>) -> Box<Self> {
        Box::new(Returns { tensor, slot })
    }
}

impl<B: Buffer> InPlace for Returns<B, B> {
    fn buffers(&mut self) -> (&mut dyn AnyBuffer, Option<&dyn AnyBuffer>) {
        (&mut self.tensor, None)
    }

    fn finish(self: Box<Self>, result: Result<()>) {
        let Returns { tensor, slot } = *self;
        slot.complete(result.map(|()| tensor));
    }
}

/// An out-of-place operation's input, its output, and the slot the output goes to.
pub(crate) struct ReturnsInto<B> {
    input: B,
    output: Returns<B, B>,
}

impl<B> ReturnsInto<B> {
    pub fn new(input: B, output: B, slot: Completion<B>) -> Box<Self> {
        Box::new(ReturnsInto {
            input,
            output: Returns {
                tensor: output,
                slot,
            },
        })
    }
}

impl<B: Buffer> InPlace for ReturnsInto<B> {
    fn buffers(&mut self) -> (&mut dyn AnyBuffer, Option<&dyn AnyBuffer>) {
        (&mut self.output.tensor, Some(&self.input))
    }

    /// Hands the output back; the input goes when the operation is done with it.
    fn finish(self: Box<Self>, result: Result<()>) {
        Box::new(self.output).finish(result);
    }
}

/// What a resized operation hands its caller, made from the new tensor and the rows
/// received from each rank.
pub(crate) trait FromOutput<B>: Sized {
    fn from_output(output: B, received: Vec<usize>) -> Self;
}

/// Allgather's and reducescatter's result: the new tensor.
impl<B: Buffer> FromOutput<B> for B {
    fn from_output(output: B, _received: Vec<usize>) -> Self {
        output
    }
}

/// Alltoall's result: the received tensor and the rows from each rank.
impl<B: Buffer> FromOutput<B> for (B, Vec<usize>) {
    fn from_output(output: B, received: Vec<usize>) -> Self {
        (output, received)
    }
}

impl<B: Buffer, T: FromOutput<B> + Send> Resized for Returns<B, T> {
    fn run(
        self: Box<Self>,
        shape: &[usize],
        received: Vec<usize>,
        op: &mut dyn FnMut(&dyn AnyBuffer, &mut dyn AnyBuffer) -> Result<()>,
    ) -> Result<()> {
        let mut output = self.tensor.zeroed(shape);
        let result = op(&self.tensor, &mut output);
        let reply = result.clone().map(|()| T::from_output(output, received));
        self.slot.complete(reply);
        result
    }

    fn fail(self: Box<Self>, err: Error) {
        self.slot.complete(Err(err));
    }
}
