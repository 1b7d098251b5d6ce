//! Running agreed responses: data collectives through the middleware stack, control
//! operations on the engine's own path, and completing what this rank submitted.

use std::sync::Arc;

use hvd_core::{Device, DeviceBuffer, Error, Result, Tensor, TensorMut};

use super::buffer::{AnyBuffer, RawBuffer};
use super::compress::{narrowed, widen_into};
use super::engine::Engine;
use super::request::{BatchKey, Name, Op};
use super::response::{Plan, Response};
use super::work::{Control, InPlace, Resized, Work};

/// One agreed response paired with what this rank submitted for it (not an operation of
/// its own: the plan's [`Op`] says which).
enum Item {
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
struct Batched {
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
        match self {
            Memory::Caller(tensor) => tensor.buffer(),
            Memory::Zeros(zeros) => zeros,
        }
    }

    fn finish(self, result: Result<()>) {
        if let Memory::Caller(tensor) = self {
            tensor.finish(result);
        }
    }
}

impl Item {
    /// Pairs `plan` with this rank's `work` for it; `None` when there is nothing to run
    /// here (a joined rank takes part in allreduces only). The plan's op says how a
    /// batched item batches: every rank's request was of this rank's kind, or the
    /// response is an error.
    fn new(name: Name, plan: Arc<Plan>, work: Option<Work>) -> Option<Item> {
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

    fn name(&self) -> &str {
        match self {
            Item::Batched(Batched { name, .. })
            | Item::Resized { name, .. }
            | Item::Control { name, .. } => name,
        }
    }

    fn fail(self, err: Error) {
        match self {
            Item::Batched(b) => b.tensor.finish(Err(err)),
            Item::Resized { tensor, .. } => tensor.fail(err),
            Item::Control { control, .. } => Work::Control(control).fail(err),
        }
    }
}

type Items = std::iter::Peekable<std::vec::IntoIter<Item>>;

/// The next item when it runs in one batch with `first`: the same stack call on the
/// same device.
fn next_in_batch(items: &mut Items, first: &Batched) -> Option<Batched> {
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

impl Engine {
    /// Runs `responses` in order; consecutive allreduces with one reduction, and
    /// consecutive broadcasts from one root, on one device, go to the stack as one batch
    /// (how a batch travels is Fusion's to decide). Fails the rest after an error.
    pub(super) fn execute(&mut self, responses: Vec<Response>) -> Result<()> {
        let claimed: Vec<(Response, Option<Work>)> = responses
            .into_iter()
            .map(|r| {
                let work = self.pending.remove(&r.name).map(|p| p.work);
                (r, work)
            })
            .collect();
        // This rank's submissions among them are done: their names may be used again,
        // before any caller hears back.
        let mine = claimed
            .iter()
            .filter(|(_, work)| work.is_some())
            .map(|(r, _)| &*r.name);
        let completed = self.queue.finished(mine);
        self.stats.completed(completed);
        let mut items = Vec::with_capacity(claimed.len());
        for (response, work) in claimed {
            match response.outcome {
                Err(err) => {
                    if let Some(work) = work {
                        work.fail(err);
                    }
                }
                Ok(plan) => items.extend(Item::new(response.name, plan, work)),
            }
        }
        let mut items: Items = items.into_iter().peekable();
        while let Some(item) = items.next() {
            self.trace.recorder.queue_end(item.name());
            let result = match item {
                Item::Resized { name, plan, tensor } => self.run_resized(&name, &plan, tensor),
                Item::Control { plan, control, .. } => self.run_control(&plan, control),
                Item::Batched(first) => {
                    let mut batch = vec![first];
                    while let Some(next) = next_in_batch(&mut items, &batch[0]) {
                        self.trace.recorder.queue_end(&next.name);
                        batch.push(next);
                    }
                    self.run_batch(batch)
                }
            };
            if let Err(err) = result {
                items.for_each(|item| item.fail(err.clone()));
                return Err(err);
            }
        }
        Ok(())
    }

    /// Runs a batch through the stack over views of its tensors (the tensors themselves,
    /// or the wire buffers of those the plan compresses), then hands them back.
    fn run_batch(&mut self, mut batch: Vec<Batched>) -> Result<()> {
        let key = batch[0].key;
        let spares = self.wire_buffers.for_batch(batch.len());
        let stack = self.stack.collective();
        let result = (|| {
            let mut views = Vec::with_capacity(batch.len());
            for (item, spare) in batch.iter_mut().zip(spares.iter_mut()) {
                let buffer = item.tensor.buffer();
                views.push(match item.plan.wire {
                    Some(wire) => narrowed(&item.name, buffer, wire, spare)?,
                    None => view(&item.name, buffer)?,
                });
            }
            match key {
                BatchKey::Allreduce(reduction) => stack.allreduce(&mut views, reduction),
                BatchKey::Broadcast(root) => stack.broadcast(&mut views, root),
                BatchKey::Adasum => hvd_core::adasum::allreduce(stack, &mut views),
            }
        })();
        for (mut item, spare) in batch.into_iter().zip(spares.iter()) {
            if let (Ok(()), Some(wire)) = (&result, item.plan.wire) {
                widen_into(item.tensor.buffer(), wire, spare);
            }
            item.tensor.finish(result.clone());
        }
        result
    }

    /// Runs a collective whose result is a new tensor through the stack.
    fn run_resized(&mut self, name: &str, plan: &Plan, tensor: Box<dyn Resized>) -> Result<()> {
        let me = self.rank;
        let stack = self.stack.collective();
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
    fn run_control(&mut self, plan: &Plan, control: Control) -> Result<()> {
        match control {
            // Every member announced the barrier before its response was made: they have
            // all reached it.
            Control::Barrier(slot) => slot.complete(Ok(())),
            Control::Join(slot) => slot.complete(Ok(plan.last_joined)),
            Control::AddProcessSet { registry, slot } => {
                let Op::AddProcessSet { members } = &plan.op else {
                    let err = paired_wrongly(self.rank, "", &plan.op, "add_process_set");
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
                    let err = paired_wrongly(self.rank, "", &plan.op, "remove_process_set");
                    slot.complete(Err(err.clone()));
                    return Err(err);
                };
                slot.complete(registry.remove(id));
            }
        }
        Ok(())
    }
}
