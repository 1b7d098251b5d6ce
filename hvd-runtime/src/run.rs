//! Running one agreed response: a plan paired with what this rank submitted for it
//! ([`Item`]), data collectives through the middleware stack, control operations on the
//! engine's own path. The executor decides the order and records the spans.

use std::sync::Arc;

use hvd_core::{Device, DeviceBuffer, Error, Result, Tensor, TensorMut};

use super::buffer::{AnyBuffer, RawBuffer};
use super::compress::{WireBuffers, narrowed, widen_into};
use super::request::{BatchKey, Name, Op};
use super::response::Plan;
use super::stack::Stack;
use super::staging;
use super::work::{Control, InPlace, Resized, Work};

/// One agreed response paired with what this rank submitted for it (not an operation of
/// its own: the plan's [`Op`] says which).
pub(super) enum Item {
    Batched(Batched),
    Resized {
        name: Name,
        plan: Arc<Plan>,
        tensor: Box<dyn Resized>,
    },
    Control {
        name: Name,
        plan: Arc<Plan>,
        control: Control,
    },
}

/// An allreduce or broadcast: runs in one batch with its neighbours of the same key.
pub(super) struct Batched {
    key: BatchKey,
    name: Name,
    plan: Arc<Plan>,
    tensor: Memory,
}

/// The memory a batched item runs on.
enum Memory {
    /// The caller's tensor.
    Caller(Box<dyn InPlace>),
    /// Zeros of the agreed shape: what a joined rank contributes.
    Zeros(RawBuffer),
}

impl Memory {
    fn buffer(&mut self) -> &mut dyn AnyBuffer {
        self.buffers().0
    }

    /// The buffer the result goes to, and the one the operation reads when that is
    /// another (an out-of-place caller's input).
    fn buffers(&mut self) -> (&mut dyn AnyBuffer, Option<&dyn AnyBuffer>) {
        match self {
            Memory::Caller(tensor) => tensor.buffers(),
            Memory::Zeros(zeros) => (zeros, None),
        }
    }

    fn finish(self, result: Result<()>) {
        if let Memory::Caller(tensor) = self {
            tensor.finish(result);
        }
    }
}

impl Batched {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tensor's bytes, when it is in host memory.
    pub fn host_bytes(&mut self) -> Option<&mut [u8]> {
        let buffer = self.tensor.buffer();
        (buffer.device() == Device::Cpu).then(|| buffer.bytes_mut())
    }

    /// Hands the tensor back as it now is, or the error: how every batched operation
    /// ends, run through the stack or landed in a negotiation round.
    pub fn finish(self, result: Result<()>) {
        self.tensor.finish(result);
    }
}

impl Item {
    /// Pairs `plan` with this rank's `work` for it; `None` when there is nothing to run
    /// here (a joined rank takes part in allreduces only). The plan's op says how a
    /// batched item batches: every rank's request was of this rank's kind, or the
    /// response is an error.
    pub fn new(name: Name, plan: Arc<Plan>, work: Option<Work>) -> Option<Item> {
        let tensor = match work {
            Some(Work::InPlace(tensor)) => Memory::Caller(tensor),
            Some(Work::Resized(tensor)) => return Some(Item::Resized { name, plan, tensor }),
            Some(Work::Control(control)) => {
                return Some(Item::Control {
                    name,
                    plan,
                    control,
                });
            }
            None if plan.op.batch_key().is_some() => {
                Memory::Zeros(RawBuffer::zeroed(plan.dtype, &plan.shape))
            }
            None => return None,
        };
        // A tensor without a batch key is dropped, which fails its caller (see
        // `Completion`): a fault in the engine, not in the program.
        let key = plan.op.batch_key()?;
        Some(Item::Batched(Batched {
            key,
            name,
            plan,
            tensor,
        }))
    }

    pub fn name(&self) -> &str {
        match self {
            Item::Batched(Batched { name, .. })
            | Item::Resized { name, .. }
            | Item::Control { name, .. } => name,
        }
    }

    pub fn fail(self, err: Error) {
        match self {
            Item::Batched(b) => b.finish(Err(err)),
            Item::Resized { tensor, .. } => tensor.fail(err),
            Item::Control { control, .. } => Work::Control(control).fail(err),
        }
    }
}

pub(super) type Items = std::iter::Peekable<std::vec::IntoIter<Item>>;

/// The next item when it runs in one batch with `first`: the same stack call on the
/// same device.
pub(super) fn next_in_batch(items: &mut Items, first: &Batched) -> Option<Batched> {
    match items.peek() {
        Some(Item::Batched(b)) if b.key == first.key && b.plan.device == first.plan.device => {}
        _ => return None,
    }
    match items.next() {
        Some(Item::Batched(b)) => Some(b),
        _ => None,
    }
}

/// Rows of the first dim that rank `r` of `n` gets from reducescatter: as even as
/// possible, the first ranks taking one more.
fn scatter_rows(rows: usize, n: usize, r: usize) -> usize {
    rows / n + usize::from(r < rows % n)
}

/// The writable view of a buffer, on the host or on its device.
fn view<'a>(name: &'a str, buffer: &'a mut dyn AnyBuffer) -> Result<TensorMut<'a>> {
    let (dtype, shape) = (buffer.dtype(), buffer.shape());
    if buffer.device() == Device::Cpu {
        return TensorMut::from_bytes(name, dtype, shape, buffer.bytes_mut());
    }
    let buffer: &'a dyn AnyBuffer = buffer;
    TensorMut::from_device(name, dtype, shape, device_memory(name, buffer)?)
}

/// The writable view of an operation that reads `input` and writes `output`, both on
/// the same device: the transport reads one and writes the other, so nothing copies the
/// input first. Host tensors never get here: their input is copied when submitted.
fn view_into<'a>(
    name: &'a str,
    input: &'a dyn AnyBuffer,
    output: &'a mut dyn AnyBuffer,
) -> Result<TensorMut<'a>> {
    let (dtype, shape) = (output.dtype(), output.shape());
    let output: &'a dyn AnyBuffer = output;
    TensorMut::from_device_into(
        name,
        dtype,
        shape,
        device_memory(name, input)?,
        device_memory(name, output)?,
    )
}

/// The read-only view of a buffer, on the host or on its device.
fn input<'a>(name: &'a str, buffer: &'a dyn AnyBuffer) -> Result<Tensor<'a>> {
    let (dtype, shape) = (buffer.dtype(), buffer.shape());
    if buffer.device() == Device::Cpu {
        return Tensor::from_bytes(name, dtype, shape, buffer.bytes());
    }
    Tensor::from_device(name, dtype, shape, device_memory(name, buffer)?)
}

fn device_memory<'a>(name: &str, buffer: &'a dyn AnyBuffer) -> Result<DeviceBuffer<'a>> {
    buffer.device_memory().ok_or_else(|| Error::Unsupported {
        backend: "hvd",
        what: format!(
            "the buffer of '{name}': it says it is on {} but gives no device memory \
             (Buffer::device_memory)",
            buffer.device()
        ),
    })
}

/// The error for a plan that does not fit what this rank submitted: negotiation makes
/// every rank's requests agree, so only a fault in the engine gets here.
fn paired_wrongly(rank: usize, name: &str, op: &Op, submitted: &str) -> Error {
    Error::invalid(
        rank,
        op.kind().name(),
        name,
        format!(
            "the agreed {} does not fit this rank's {submitted}",
            op.kind()
        ),
    )
}

/// Runs a batch through the stack over views of its tensors (the tensors themselves,
/// or the wire buffers of those the plan compresses), then hands them back.
pub(super) fn run_batch(
    stack: &Stack,
    wire_buffers: &mut WireBuffers,
    mut batch: Vec<Batched>,
) -> Result<()> {
    let key = batch[0].key;
    let spares = wire_buffers.for_batch(batch.len());
    let full = stack;
    let stack = stack.collective();
    let result = (|| {
        let mut views = Vec::with_capacity(batch.len());
        for (item, spare) in batch.iter_mut().zip(spares.iter_mut()) {
            let (buffer, input) = item.tensor.buffers();
            views.push(match (item.plan.wire, input) {
                (Some(wire), _) => narrowed(&item.name, buffer, wire, spare)?,
                (None, Some(input)) => view_into(&item.name, input, buffer)?,
                (None, None) => view(&item.name, buffer)?,
            });
        }
        match key {
            BatchKey::Allreduce(reduction) => stack.allreduce(&mut views, reduction),
            BatchKey::Broadcast(root) => stack.broadcast(&mut views, root),
            BatchKey::Adasum => adasum(full, &mut views),
        }
    })();
    for (mut item, spare) in batch.into_iter().zip(spares.iter()) {
        if let (Ok(()), Some(wire)) = (&result, item.plan.wire) {
            widen_into(item.tensor.buffer(), wire, spare);
        }
        item.finish(result.clone());
    }
    result
}

/// Combines a batch with Adasum, which runs on host memory: device tensors are copied
/// down (from their inputs), combined over the stack's host transport, and copied up
/// (into their outputs), by the device transport's memory or host staging's.
fn adasum(stack: &Stack, views: &mut [TensorMut<'_>]) -> Result<()> {
    let collective = stack.collective();
    let device = views.first().map_or(Device::Cpu, TensorMut::device);
    if device == Device::Cpu {
        return hvd_core::adasum::allreduce(collective, views);
    }
    let memory = stack.host_copies(device, "adasum", &hvd_core::batch_name(views))?;
    staging::batch(memory.as_ref(), views, |host| {
        hvd_core::adasum::allreduce(collective, host)
    })
}

/// Runs a collective whose result is a new tensor through the stack.
pub(super) fn run_resized(
    stack: &Stack,
    me: usize,
    name: &str,
    plan: &Plan,
    tensor: Box<dyn Resized>,
) -> Result<()> {
    let stack = stack.collective();
    let n = stack.topology().size();
    let row = plan.row_elements();
    let rest: Vec<usize> = plan.shape.iter().skip(1).copied().collect();
    let with_rows = |rows: usize| [&[rows][..], &rest].concat();
    match &plan.op {
        Op::Allgather => {
            let counts: Vec<usize> = plan.rows.iter().map(|r| r * row).collect();
            let shape = with_rows(plan.rows.iter().sum());
            tensor.run(&shape, Vec::new(), &mut |i, o| {
                stack.allgather(&input(name, i)?, &mut view(name, o)?, &counts)
            })
        }
        Op::Alltoall { .. } => {
            // Every rank's splits, agreed: this rank's are its own request's.
            let splits = plan.splits.get(me).map_or(&[][..], Vec::as_slice);
            let send: Vec<usize> = splits.iter().map(|r| r * row).collect();
            let received: Vec<usize> = plan
                .splits
                .iter()
                .map(|s| s.get(me).copied().unwrap_or(0))
                .collect();
            let recv: Vec<usize> = received.iter().map(|r| r * row).collect();
            let shape = with_rows(received.iter().sum());
            tensor.run(&shape, received, &mut |i, o| {
                stack.alltoall(&input(name, i)?, &send, &mut view(name, o)?, &recv)
            })
        }
        &Op::Reducescatter { reduction } => {
            let rows = plan.shape.first().copied().unwrap_or(1);
            let counts: Vec<usize> = (0..n).map(|r| scatter_rows(rows, n, r) * row).collect();
            let shape = with_rows(scatter_rows(rows, n, me));
            tensor.run(&shape, Vec::new(), &mut |i, o| {
                stack.reducescatter(&input(name, i)?, &mut view(name, o)?, &counts, reduction)
            })
        }
        other => Err(paired_wrongly(me, name, other, "a new tensor")),
    }
}

/// Runs a control operation: nothing travels, negotiation already did the work.
pub(super) fn run_control(rank: usize, plan: &Plan, control: Control) -> Result<()> {
    match control {
        // Every member announced the barrier before its response was made: they have
        // all reached it.
        Control::Barrier(slot) => slot.complete(Ok(())),
        Control::Join(slot) => slot.complete(Ok(plan.last_joined)),
        Control::AddProcessSet { registry, slot } => {
            let Op::AddProcessSet { members } = &plan.op else {
                let err = paired_wrongly(rank, "", &plan.op, "add_process_set");
                slot.complete(Err(err.clone()));
                return Err(err);
            };
            // A split that failed leaves this rank's transport in doubt: the job stops.
            let added = registry.add(members);
            slot.complete(added.clone());
            added?;
        }
        Control::RemoveProcessSet { registry, slot } => {
            let &Op::RemoveProcessSet { id } = &plan.op else {
                let err = paired_wrongly(rank, "", &plan.op, "remove_process_set");
                slot.complete(Err(err.clone()));
                return Err(err);
            };
            slot.complete(registry.remove(id));
        }
    }
    Ok(())
}
