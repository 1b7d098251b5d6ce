//! What differs between a fused allreduce and a fused broadcast: everything else (the
//! plan, the buffer, the copies) is the same code.

use hvd_core::{Collective, DType, Reduction, Result, TensorMut, kernels};

/// The two batched calls of hvd-core's `Collective` that [`Fusion`](crate::Fusion)
/// packs, with the arguments the packing code needs, so one code path runs both.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FusedOp {
    Allreduce(Reduction),
    Broadcast { root: usize },
}

impl FusedOp {
    /// The dtype a tensor is packed as. Allreduce combines elements, so a pack holds one
    /// dtype; broadcast only moves bytes, so tensors of any dtypes share one byte pack.
    pub fn packed_dtype(self, dtype: DType) -> DType {
        match self {
            FusedOp::Allreduce(_) => dtype,
            FusedOp::Broadcast { .. } => DType::U8,
        }
    }

    /// Whether this rank's tensors are copied into the buffer: a broadcast sends the
    /// root's only, and the others' buffer is overwritten anyway.
    pub fn sends(self, rank: usize) -> bool {
        match self {
            FusedOp::Allreduce(_) => true,
            FusedOp::Broadcast { root } => rank == root,
        }
    }

    /// Whether the result is copied back out: a broadcast leaves the root's data as it was.
    pub fn receives(self, rank: usize) -> bool {
        match self {
            FusedOp::Allreduce(_) => true,
            FusedOp::Broadcast { root } => rank != root,
        }
    }

    /// Work done on a tensor's bytes right after they are copied in, while they are still
    /// in cache: the allreduce prescale.
    pub fn prepare(self, dtype: DType, bytes: &mut [u8]) {
        if let FusedOp::Allreduce(reduction) = self {
            kernels::prescale(dtype, reduction, bytes);
        }
    }

    /// Runs the operation on the inner collective. `packed`: the batch is fusion-buffer
    /// packs, whose prescale [`FusedOp::prepare`] has applied already.
    pub fn call<C: Collective>(
        self,
        inner: &C,
        tensors: &mut [TensorMut<'_>],
        packed: bool,
    ) -> Result<()> {
        match self {
            FusedOp::Allreduce(reduction) if packed => {
                inner.allreduce(tensors, reduction.with_prescale(1.0))
            }
            FusedOp::Allreduce(reduction) => inner.allreduce(tensors, reduction),
            FusedOp::Broadcast { root } => inner.broadcast(tensors, root),
        }
    }
}
