//! [`Scheduled`]: the [`Collective`] trait over a [`Transport`]'s event loop, choosing an
//! algorithm per call.

use std::sync::Arc;

use super::{Call, Engine, Group, Transport, check_rank};
use crate::schedule::{
    Algorithm, Layout, Ring, Schedule, barrier, blocks, broadcast, choose, exchange, halving,
    recursive,
};
use crate::{
    Collective, Device, Error, OpKind, ReduceOp, Reduction, Result, Store, Tensor, TensorMut,
    Topology, batch_name, validate,
};

/// One rank's member of a group of a scheduled transport: every operation of
/// [`Collective`] as a schedule of [`crate::schedule`], run by the transport's
/// [`Engine`]. The first failure poisons the group: every later call returns it.
pub struct Scheduled<T: Transport> {
    topology: Topology,
    settings: T,
    store: Arc<dyn Store>,
    /// Store namespace of this group; sub-groups live below it.
    prefix: String,
    group: Group<T::Engine>,
}

impl<T: Transport> std::fmt::Debug for Scheduled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduled")
            .field("topology", &self.topology)
            .field("prefix", &self.prefix)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Scheduled<T> {
    /// Joins the group of `size` ranks as `rank`, meeting the others through `store`,
    /// with `settings`: see [`Transport::join`]. Every rank calls it with the same `size`
    /// and store; it fails after the transport's start timeout naming the ranks that
    /// never appeared.
    pub fn connect(store: Arc<dyn Store>, rank: usize, size: usize, settings: T) -> Result<Self> {
        Self::join(&settings, store, T::ROOT_PREFIX.into(), rank, size)
    }

    fn join(
        settings: &T,
        store: Arc<dyn Store>,
        prefix: String,
        rank: usize,
        size: usize,
    ) -> Result<Self> {
        check_rank(rank, size)?;
        let joined = settings.join(&store, &prefix, rank, size)?;
        tracing::debug!(
            "rank {rank} of {size}: {} group '{prefix}' connected",
            T::BACKEND
        );
        Ok(Scheduled {
            topology: joined.topology,
            settings: joined.settings,
            store,
            prefix,
            group: Group::new(rank, joined.engine),
        })
    }

    /// The settings this group runs with.
    pub fn settings(&self) -> &T {
        &self.settings
    }

    fn rank(&self) -> usize {
        self.topology.rank()
    }

    fn size(&self) -> usize {
        self.topology.size()
    }

    /// The algorithm of a call of `op` over `bytes`, the same on every rank.
    fn algorithm(&self, op: OpKind, bytes: usize) -> Algorithm {
        choose(op, self.size(), bytes, &self.settings.tuning())
    }

    fn chunk(&self) -> usize {
        self.settings.tuning().chunk_bytes
    }

    /// Runs one call: `prepare` lays out the data once the call is numbered, and
    /// returns the schedule to run over it (none when the data needs no exchange). A
    /// failure poisons the group.
    fn run<'l>(
        &self,
        op: OpKind,
        tensor: &str,
        reduction: Reduction,
        layout: &mut Layout<'l>,
        prepare: impl FnOnce(&mut Layout<'l>) -> std::io::Result<Option<Box<dyn Schedule>>>,
    ) -> Result<()> {
        let mut calls = self.group.lock()?;
        let call = Call {
            rank: self.rank(),
            ranks: self.size(),
            op,
            tensor,
            seq: calls.next_seq(),
            reduction,
        };
        let local = |e: std::io::Error| Error::invalid(call.rank, op.name(), tensor, e.to_string());
        let Some(mut schedule) = prepare(layout).map_err(local)? else {
            return Ok(());
        };
        let Err(error) = calls.transport.run(&call, layout, schedule.as_mut()) else {
            return Ok(());
        };
        tracing::warn!(
            "rank {}: {op} of '{tensor}' failed, closing the group: {error}",
            call.rank
        );
        calls.poison(error.clone());
        Err(error)
    }
}

fn no_reduction() -> Reduction {
    Reduction::new(ReduceOp::Sum)
}

/// A layout of every tensor of a batch, in order.
fn batch_layout<'a>(
    backend: &'static str,
    rank: usize,
    op: OpKind,
    tensors: &'a mut [TensorMut<'_>],
) -> Result<Layout<'a>> {
    let mut layout = Layout::new();
    for t in tensors.iter_mut() {
        let dtype = t.dtype();
        layout.push(dtype, t.host_mut_for(backend, rank, op.name())?);
    }
    Ok(layout)
}

impl<T: Transport> Collective for Scheduled<T> {
    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn backend(&self) -> &'static str {
        T::BACKEND
    }

    fn supports(&self, device: Device) -> bool {
        device == Device::Cpu
    }

    /// A batch travels as one message or ring pass, gathered and scattered in place.
    fn fuses_batches(&self) -> bool {
        true
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpKind::Allreduce);
        validate::allreduce(rank, tensors, reduction)?;
        let name = batch_name(tensors);
        let mut layout = batch_layout(T::BACKEND, rank, op, tensors)?;
        self.run(op, &name, reduction, &mut layout, |layout| {
            layout.prescale(reduction)?;
            if size == 1 {
                layout.finish(0..layout.len(), reduction, 1)?;
                return Ok(None);
            }
            let len = layout.len();
            Ok(Some(match self.algorithm(op, len) {
                Algorithm::Halving => {
                    Box::new(halving::allreduce(rank, size, layout, self.chunk()))
                }
                Algorithm::RecursiveDoubling => {
                    Box::new(recursive::allreduce(rank, size, len, reduction))
                }
                _ => Box::new(Ring::allreduce(rank, size, layout, self.chunk())),
            }))
        })
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpKind::Broadcast);
        let name = batch_name(tensors);
        validate::root(rank, size, root, &name)?;
        let mut layout = batch_layout(T::BACKEND, rank, op, tensors)?;
        self.run(op, &name, no_reduction(), &mut layout, |layout| {
            Ok(Some(Box::new(match self.algorithm(op, layout.len()) {
                Algorithm::Flat => broadcast::Tree::flat(rank, size, root, layout, self.chunk()),
                Algorithm::Binomial => broadcast::Tree::binomial(rank, size, root, layout),
                _ => broadcast::Tree::chain(rank, size, root, layout, self.chunk()),
            })))
        })
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpKind::Allgather);
        validate::allgather(rank, size, input, output, counts)?;
        let dtype = input.dtype();
        let source = input.host_for(T::BACKEND, rank, op.name())?;
        let mut layout = Layout::new();
        layout.push(dtype, output.host_mut_for(T::BACKEND, rank, op.name())?);
        let segments = blocks(0, counts, dtype.size());
        self.run(op, input.name(), no_reduction(), &mut layout, |layout| {
            layout.write(segments[rank].start, source)?;
            Ok(Some(match self.algorithm(op, layout.len()) {
                Algorithm::GatherDoubling => {
                    Box::new(exchange::allgather_doubling(rank, size, &segments))
                }
                Algorithm::Direct => Box::new(exchange::allgather(rank, size, &segments)),
                _ => Box::new(Ring::allgather(rank, size, &segments, layout, self.chunk())),
            }))
        })
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpKind::Alltoall);
        validate::alltoall(rank, size, input, send_counts, output, recv_counts)?;
        let dtype = input.dtype();
        let source = input.host_for(T::BACKEND, rank, op.name())?;
        // Output first, then the input it is sent from.
        let mut layout = Layout::new();
        layout.push(dtype, output.host_mut_for(T::BACKEND, rank, op.name())?);
        let output_len = layout.len();
        let incoming = blocks(0, recv_counts, dtype.size());
        let outgoing = blocks(output_len, send_counts, dtype.size());
        layout.push_shared(dtype, source);
        self.run(op, input.name(), no_reduction(), &mut layout, |layout| {
            let own = outgoing[rank].start - output_len..outgoing[rank].end - output_len;
            layout.write(incoming[rank].start, &source[own])?;
            Ok(Some(Box::new(exchange::alltoall(
                rank,
                size,
                &outgoing,
                &incoming,
                layout,
                self.chunk(),
            ))))
        })
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpKind::Reducescatter);
        validate::reducescatter(rank, size, input, output, counts, reduction)?;
        let dtype = input.dtype();
        // The ring combines in place, and the input is read-only: work on a copy.
        let mut work = input.host_for(T::BACKEND, rank, op.name())?.to_vec();
        let segments = blocks(0, counts, dtype.size());
        {
            let mut layout = Layout::new();
            layout.push(dtype, &mut work);
            self.run(op, input.name(), reduction, &mut layout, |layout| {
                layout.prescale(reduction)?;
                if size == 1 {
                    layout.finish(0..layout.len(), reduction, 1)?;
                    return Ok(None);
                }
                Ok(Some(Box::new(Ring::reduce_scatter(
                    rank,
                    size,
                    &segments,
                    layout,
                    self.chunk(),
                ))))
            })?;
        }
        output
            .host_mut_for(T::BACKEND, rank, op.name())?
            .copy_from_slice(&work[segments[rank].clone()]);
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        let (rank, size) = (self.rank(), self.size());
        self.run(
            OpKind::Barrier,
            "barrier",
            no_reduction(),
            &mut Layout::new(),
            |_| Ok(Some(Box::new(barrier::barrier(rank, size)))),
        )
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let Some(sub) = self.group.split(&self.prefix, self.size(), members)? else {
            return Ok(None);
        };
        let store = self.store.clone();
        let group = Self::join(&self.settings, store, sub.prefix, sub.rank, members.len())?;
        Ok(Some(Box::new(group)))
    }
}
