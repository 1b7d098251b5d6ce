//! [`Fusion`]: the `Collective` middleware that packs batches.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use hvd_core::{Collective, Device, Reduction, Result, Tensor, TensorMut, Topology, validate};

use crate::batch;
use crate::buffer::FusionBuffer;
use crate::fused_op::FusedOp;
use crate::pack;

/// Horovod's default fusion threshold: 128 MiB (`HVD_FUSION_THRESHOLD`, alias
/// `HOROVOD_FUSION_THRESHOLD`, read by the facade).
pub const DEFAULT_THRESHOLD: usize = 128 << 20;

/// Tensor Fusion: a [`Collective`] that packs each batch of small tensors into as few
/// calls of the `inner` collective as the threshold allows. See the [crate docs](crate).
pub struct Fusion<C: Collective> {
    inner: C,
    /// Shared with the sub-groups made by `split`, so that a change reaches every process
    /// set, as Horovod's one global threshold does.
    threshold: Arc<AtomicUsize>,
    buffer: Mutex<FusionBuffer>,
}

impl<C: Collective> Fusion<C> {
    /// Wraps `inner`, packing up to `threshold_bytes` bytes per pack; 0 turns fusion off.
    pub fn new(inner: C, threshold_bytes: usize) -> Self {
        Fusion::sharing(inner, Arc::new(AtomicUsize::new(threshold_bytes)))
    }

    fn sharing(inner: C, threshold: Arc<AtomicUsize>) -> Self {
        Fusion {
            inner,
            threshold,
            buffer: Mutex::new(FusionBuffer::default()),
        }
    }

    /// The largest pack in bytes; 0 when fusion is off.
    pub fn threshold(&self) -> usize {
        self.threshold.load(Ordering::Relaxed)
    }

    /// Changes the threshold from the next call on (an autotuner does this at run time).
    ///
    /// Every rank must make the same change before the same call, or the ranks pack
    /// differently and their inner calls no longer match. The fusion buffer keeps its size
    /// when the threshold shrinks.
    pub fn set_threshold(&self, bytes: usize) {
        self.threshold.store(bytes, Ordering::Relaxed);
    }

    /// The wrapped collective.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Carries out `op` on the batch: packs through the fusion buffer, the rest as it is.
    fn fuse(&self, tensors: &mut [TensorMut<'_>], op: FusedOp) -> Result<()> {
        // Read once: a concurrent `set_threshold` must not change the plan halfway.
        let threshold = self.threshold();
        if threshold == 0 || tensors.len() < 2 {
            return op.call(&self.inner, tensors, false);
        }
        let plan = pack::plan(&batch::items(tensors, |d| op.packed_dtype(d)), threshold);
        tracing::trace!(
            tensors = tensors.len(),
            rounds = plan.rounds.len(),
            alone = plan.alone.len(),
            "fusing a batch"
        );
        let rank = self.inner.topology().rank();
        // The buffer is scratch space: after a panic elsewhere it is as good as ever.
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        for round in &plan.rounds {
            let mut regions = round.carve(buffer.region(round.bytes()));
            if op.sends(rank) {
                for (pack, region) in round.packs.iter().zip(regions.iter_mut()) {
                    batch::copy_in(tensors, pack, region, |bytes| op.prepare(pack.dtype, bytes))?;
                }
            }
            let names: Vec<String> = round
                .packs
                .iter()
                .map(|p| batch::pack_name(tensors, p))
                .collect();
            let mut views = batch::pack_views(&round.packs, &names, &mut regions)?;
            op.call(&self.inner, &mut views, true)?;
            drop(views);
            if op.receives(rank) {
                for (pack, region) in round.packs.iter().zip(&regions) {
                    batch::copy_out(tensors, pack, region)?;
                }
            }
        }
        if plan.alone.is_empty() {
            return Ok(());
        }
        batch::with_subset(tensors, &plan.alone, |alone| {
            op.call(&self.inner, alone, false)
        })
    }
}

impl<C: Collective> fmt::Debug for Fusion<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fusion")
            .field("inner", &self.inner.backend())
            .field("threshold", &self.threshold())
            .finish_non_exhaustive()
    }
}

impl<C: Collective> Collective for Fusion<C> {
    fn topology(&self) -> &Topology {
        self.inner.topology()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn supports(&self, device: Device) -> bool {
        self.inner.supports(device)
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        // Before packing, so that a bad call names the caller's tensor, as unfused.
        validate::allreduce(self.inner.topology().rank(), tensors, reduction)?;
        self.fuse(tensors, FusedOp::Allreduce(reduction))
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        if root >= self.inner.topology().size() {
            // The inner collective refuses it, and its message names the batch its own way:
            // hand it the batch unpacked so that the error reads exactly as unfused.
            return self.inner.broadcast(tensors, root);
        }
        self.fuse(tensors, FusedOp::Broadcast { root })
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        self.inner.allgather(input, output, counts)
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        self.inner.alltoall(input, send_counts, output, recv_counts)
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        self.inner.reducescatter(input, output, counts, reduction)
    }

    fn barrier(&self) -> Result<()> {
        self.inner.barrier()
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let sub = self.inner.split(members)?;
        Ok(sub.map(|sub| {
            let fused = Fusion::sharing(sub, self.threshold.clone());
            Box::new(fused) as Box<dyn Collective>
        }))
    }
}
