//! Running agreed responses through the middleware stack, and completing handles.

use hvd_core::{Error, Reduction, Result, Tensor, TensorMut};

use super::buffer::{AnyBuffer, RawBuffer};
use super::compress::{narrowed, widen_into};
use super::engine::{Engine, Pending};
use super::handle::Outcome;
use super::request::OpKind;
use super::response::{Plan, Response};

/// One response with this rank's pending submission (none on a joined rank).
struct Item {
    name: String,
    kind: OpKind,
    plan: Plan,
    pending: Option<Pending>,
    /// The submitted tensor, or zeros of the agreed shape on a joined rank.
    buffer: Option<Box<dyn AnyBuffer>>,
}

impl Item {
    /// The name and the tensor to work on.
    fn parts(&mut self) -> (&str, &mut Box<dyn AnyBuffer>) {
        let plan = &self.plan;
        let buffer = self
            .buffer
            .get_or_insert_with(|| Box::new(RawBuffer::zeroed(plan.dtype, &plan.shape)));
        (&self.name, buffer)
    }

    /// The result, once the batch ran (every buffer of a batch was filled by `parts`).
    fn take_result(&mut self) -> Box<dyn AnyBuffer> {
        let plan = &self.plan;
        self.buffer
            .take()
            .unwrap_or_else(|| Box::new(RawBuffer::zeroed(plan.dtype, &plan.shape)))
    }
}

fn view<'a>(name: &'a str, buffer: &'a mut Box<dyn AnyBuffer>) -> Result<TensorMut<'a>> {
    let (dtype, shape) = (buffer.dtype(), buffer.shape());
    TensorMut::from_bytes(name, dtype, shape, buffer.bytes_mut())
}

/// Rows of the first dim that rank `r` of `n` gets from reducescatter: as even as
/// possible, the first ranks taking one more.
fn scatter_rows(rows: usize, n: usize, r: usize) -> usize {
    rows / n + usize::from(r < rows % n)
}

impl Engine {
    /// Runs `responses` in order; consecutive allreduces with one reduction, and
    /// consecutive broadcasts from one root, go to the stack as one batch.
    pub(super) fn execute(&mut self, responses: Vec<Response>) -> Result<()> {
        let mut items = Vec::with_capacity(responses.len());
        for response in responses {
            let mut pending = self.pending.remove(&response.name);
            match response.outcome {
                Err(err) => self.complete(pending, Err(err)),
                Ok(plan) => items.push(Item {
                    name: response.name,
                    kind: response.kind,
                    plan,
                    buffer: pending.as_mut().and_then(|p| p.buffer.take()),
                    pending,
                }),
            }
        }
        let mut start = 0;
        while start < items.len() {
            let end = start + batch_len(&items[start..]);
            let batch = &mut items[start..end];
            for item in batch.iter() {
                self.trace.recorder.queue_end(&item.name);
            }
            let result = self.run_batch(batch);
            let failed = result.as_ref().err().cloned();
            for (item, outcome) in batch.iter_mut().zip(result.unwrap_or_default()) {
                self.complete(item.pending.take(), Ok(outcome));
            }
            if let Some(err) = failed {
                for item in &mut items[start..] {
                    self.complete(item.pending.take(), Err(err.clone()));
                }
                return Err(err);
            }
            start = end;
        }
        Ok(())
    }

    fn complete(&self, pending: Option<Pending>, outcome: Result<Outcome>) {
        if let Some(p) = pending {
            self.queue.finished(&p.request.name);
            self.stats.completed();
            p.slot.complete(outcome);
        }
    }

    /// Runs one batch; returns one outcome per item.
    fn run_batch(&mut self, batch: &mut [Item]) -> Result<Vec<Outcome>> {
        match batch[0].kind {
            OpKind::Allreduce => {
                let reduction = batch[0].plan.reduction;
                self.batched(batch, |stack, views| stack.allreduce(views, reduction))
            }
            OpKind::Broadcast => {
                let root = batch[0].plan.root;
                self.batched(batch, |stack, views| stack.broadcast(views, root))
            }
            _ => Ok(vec![self.run_one(&mut batch[0])?]),
        }
    }

    /// Runs `run` over views of the batch's tensors: the tensors themselves, or the
    /// wire buffers of those the plan compresses.
    fn batched(
        &mut self,
        batch: &mut [Item],
        run: impl FnOnce(&dyn hvd_core::Collective, &mut [TensorMut<'_>]) -> Result<()>,
    ) -> Result<Vec<Outcome>> {
        let spares = self.wire_buffers.for_batch(batch.len());
        {
            let mut views = Vec::with_capacity(batch.len());
            for (item, spare) in batch.iter_mut().zip(spares.iter_mut()) {
                let wire = item.plan.wire;
                let (name, buffer) = item.parts();
                views.push(match wire {
                    Some(wire) => narrowed(name, buffer.as_ref(), wire, spare)?,
                    None => view(name, buffer)?,
                });
            }
            run(self.stack.collective(), &mut views)?;
        }
        for (item, spare) in batch.iter_mut().zip(spares.iter()) {
            if let Some(wire) = item.plan.wire {
                widen_into(item.parts().1.as_mut(), wire, spare);
            }
        }
        Ok(batch
            .iter_mut()
            .map(|item| Outcome::Buffer(item.take_result()))
            .collect())
    }

    fn run_one(&mut self, item: &mut Item) -> Result<Outcome> {
        let me = self.rank;
        let n = self.stack.collective().topology().size();
        let row = item.plan.row_elements();
        let rest: Vec<usize> = item.plan.shape.iter().skip(1).copied().collect();
        let with_rows = |rows: usize| [&[rows][..], &rest].concat();
        let name = item.name.as_str();
        // These ops never run with joined ranks, so the submitted tensor is always here;
        // it is consumed and the result is a new tensor.
        let mut input = || item.buffer.take().ok_or_else(|| not_batched(name));
        match item.kind {
            OpKind::Allgather => {
                let counts: Vec<usize> = item.plan.rows.iter().map(|r| r * row).collect();
                let input = input()?;
                let mut output = input.zeroed_boxed(&with_rows(item.plan.rows.iter().sum()));
                let (dtype, shape) = (input.dtype(), input.shape());
                self.stack.collective().allgather(
                    &Tensor::from_bytes(name, dtype, shape, input.bytes())?,
                    &mut view(name, &mut output)?,
                    &counts,
                )?;
                Ok(Outcome::Buffer(output))
            }
            OpKind::Alltoall => {
                let send: Vec<usize> = item.plan.splits[me].iter().map(|r| r * row).collect();
                let received_rows: Vec<usize> = item
                    .plan
                    .splits
                    .iter()
                    .map(|s| s.get(me).copied().unwrap_or(0))
                    .collect();
                let recv: Vec<usize> = received_rows.iter().map(|r| r * row).collect();
                let input = input()?;
                let mut output = input.zeroed_boxed(&with_rows(received_rows.iter().sum()));
                let (dtype, shape) = (input.dtype(), input.shape());
                self.stack.collective().alltoall(
                    &Tensor::from_bytes(name, dtype, shape, input.bytes())?,
                    &send,
                    &mut view(name, &mut output)?,
                    &recv,
                )?;
                Ok(Outcome::Split(output, received_rows))
            }
            OpKind::Reducescatter => {
                let rows = item.plan.shape.first().copied().unwrap_or(1);
                let counts: Vec<usize> = (0..n).map(|r| scatter_rows(rows, n, r) * row).collect();
                let reduction: Reduction = item.plan.reduction;
                let input = input()?;
                let mut output = input.zeroed_boxed(&with_rows(scatter_rows(rows, n, me)));
                let (dtype, shape) = (input.dtype(), input.shape());
                self.stack.collective().reducescatter(
                    &Tensor::from_bytes(name, dtype, shape, input.bytes())?,
                    &mut view(name, &mut output)?,
                    &counts,
                    reduction,
                )?;
                Ok(Outcome::Buffer(output))
            }
            OpKind::Barrier => self.stack.collective().barrier().map(|()| Outcome::Done),
            OpKind::Join => Ok(Outcome::Rank(item.plan.last_joined)),
            OpKind::AddProcessSet => {
                let registry = self
                    .registry
                    .clone()
                    .ok_or_else(|| not_global(&item.name))?;
                let members = item
                    .pending
                    .as_ref()
                    .map(|p| p.request.splits.clone())
                    .unwrap_or_default();
                registry.add(&members).map(Outcome::Rank)
            }
            OpKind::RemoveProcessSet => {
                let registry = self
                    .registry
                    .clone()
                    .ok_or_else(|| not_global(&item.name))?;
                registry.remove(item.plan.root).map(|()| Outcome::Done)
            }
            OpKind::Allreduce | OpKind::Broadcast => Err(not_batched(name)),
        }
    }
}

/// How many items from the start of `items` run as one batch: consecutive allreduces
/// with one reduction, or broadcasts from one root, on one device. How a batch travels
/// (packed, or in runs of at most the fusion threshold) is Fusion's to decide.
fn batch_len(items: &[Item]) -> usize {
    let first = &items[0];
    if !matches!(first.kind, OpKind::Allreduce | OpKind::Broadcast) {
        return 1;
    }
    1 + items[1..]
        .iter()
        .take_while(|i| {
            i.kind == first.kind
                && i.plan.reduction == first.plan.reduction
                && i.plan.root == first.plan.root
                && i.plan.device == first.plan.device
        })
        .count()
}

fn not_batched(name: &str) -> Error {
    Error::Shutdown {
        cause: format!("internal error: '{name}' bypassed batching"),
    }
}

fn not_global(name: &str) -> Error {
    Error::Shutdown {
        cause: format!("internal error: '{name}' reached a process set's own engine"),
    }
}
