//! The `Collective` trait: what a transport does, and nothing more.

use std::sync::Arc;

use crate::{Device, DeviceMemory, Error, Reduction, Result, Tensor, TensorMut, Topology};

/// A group of ranks that can run collective operations together.
///
/// One instance lives on each rank. Every method is *collective*: every rank of the group
/// calls it, in the same order, with matching arguments (same dtypes, same element counts
/// where they must match, same root, same reduction). A call returns when the operation is
/// complete on this rank; asynchrony, naming and ordering live in the runtime above.
///
/// Counts are in elements of the tensor's dtype. Tensor names are carried for error
/// messages and tracing only; a transport never matches on them.
///
/// Implementations are `Send + Sync` so that they can be shared behind an `Arc`, but calls
/// on one instance are meant to come from one thread at a time; a transport may serialise
/// concurrent calls with a lock.
///
/// Every wait inside an implementation has a timeout and ends in an [`Error`]
/// that names the rank, the tensor and the operation; a dead peer is an error, not a hang.
/// Prove an implementation with the `conformance` suite (feature `conformance`).
pub trait Collective: Send + Sync {
    /// This rank's place in the group.
    fn topology(&self) -> &Topology;

    /// Short lower-case name of the transport (`"tcp"`, `"mpi"`, `"nccl"`), used in traces
    /// (`TCP_ALLREDUCE`) and messages.
    fn backend(&self) -> &'static str;

    /// Whether tensors in memory of `device` can be passed to this transport.
    fn supports(&self, device: Device) -> bool;

    /// The name of the backend that carries calls on memory of `device`: this one's,
    /// or for a collective over several transports (a router), the one it sends them to,
    /// so traces name it (`NCCL_ALLREDUCE`).
    fn backend_on(&self, device: Device) -> &'static str {
        let _ = device;
        self.backend()
    }

    /// True when the transport moves a whole batch as one operation without copying it
    /// (scatter-gather I/O, grouped calls), so Tensor Fusion need not pack batches into
    /// a buffer of its own. The default, false, suits transports that run one tensor at
    /// a time.
    fn fuses_batches(&self) -> bool {
        false
    }

    /// The memory of this transport's own stream on `device`, for a transport that takes
    /// device memory: copies queued on it run before the transport's next call, so the
    /// layers above can pack device tensors (Tensor Fusion) without waiting in between.
    /// The default, `None`, suits host transports.
    fn device_memory(&self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        let _ = device;
        None
    }

    /// Reduces every tensor of the batch across the group, in place.
    ///
    /// Tensors of a batch may differ in dtype and length but share the reduction. The
    /// `prescale` factor applies to each rank's contribution, the `postscale` factor to the
    /// result; see [`ReduceOp`](crate::ReduceOp) for the exact semantics.
    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()>;

    /// Copies every tensor of the batch from `root` to every rank, in place.
    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()>;

    /// Concatenates every rank's `input` into `output`, in rank order.
    ///
    /// `counts[r]` is the number of elements rank `r` contributes (it may be zero);
    /// `output` holds exactly their sum. [`gather_counts`] finds the
    /// counts when only the local one is known.
    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()>;

    /// Sends `send_counts[r]` consecutive elements of `input` to each rank `r` (in rank
    /// order) and receives `recv_counts[r]` elements from each rank `r` into `output`.
    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()>;

    /// Reduces `input` across the group and leaves block `r` of the result on rank `r`.
    ///
    /// `counts[r]` is the length of block `r`; `input` holds their sum and `output` holds
    /// `counts[rank]` elements.
    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()>;

    /// Returns once every rank of the group has entered the barrier.
    fn barrier(&self) -> Result<()>;

    /// Creates a sub-group of `members` (ranks of this group, in the order that becomes the
    /// sub-group's rank order). Collective over this whole group: every rank calls it with
    /// the same members; members get the sub-group, the others `None`.
    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>>;
}

/// Allgathers one count per rank: how many elements each rank will contribute to a
/// following allgather, or any other per-rank count. A count no rank could have sent (a
/// negative one, or counts whose total overflows) is a protocol error naming the rank.
pub fn gather_counts(group: &dyn Collective, local: usize) -> Result<Vec<usize>> {
    let (rank, size) = (group.topology().rank(), group.topology().size());
    let mine = [local as i64];
    let mut all = vec![0i64; size];
    group.allgather(
        &Tensor::from_slice("hvd.counts", &mine),
        &mut TensorMut::from_slice("hvd.counts", &mut all),
        &vec![1; size],
    )?;
    let counts = all
        .into_iter()
        .enumerate()
        .map(|(peer, c)| {
            usize::try_from(c)
                .map_err(|_| protocol(rank, &format!("rank {peer}"), format!("a count of {c}")))
        })
        .collect::<Result<Vec<usize>>>()?;
    counts_total(rank, &counts)?;
    Ok(counts)
}

fn protocol(rank: usize, peer: &str, reason: String) -> Error {
    Error::Protocol {
        rank,
        peer: peer.into(),
        reason,
    }
}

/// The sum of `counts`, an error when it overflows.
fn counts_total(rank: usize, counts: &[usize]) -> Result<usize> {
    counts
        .iter()
        .try_fold(0usize, |total, c| total.checked_add(*c))
        .ok_or_else(|| {
            protocol(
                rank,
                "the group",
                format!("counts {counts:?} whose total overflows"),
            )
        })
}

/// The most [`allgather_bytes`] gathers from all ranks together: it carries control
/// messages, and a total beyond this is a peer's garbage, not a table to allocate.
pub const MAX_GATHERED_BYTES: usize = 1 << 30;

/// Cuts `all` into consecutive pieces of `counts` bytes, one per rank.
pub fn split_by_counts(all: &[u8], counts: &[usize]) -> Vec<Vec<u8>> {
    let mut at = 0;
    counts
        .iter()
        .map(|&c| {
            let piece = all[at..at + c].to_vec();
            at += c;
            piece
        })
        .collect()
}

/// Allgathers variable-length byte strings: every rank's `bytes`, in rank order.
pub fn allgather_bytes(group: &dyn Collective, name: &str, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    let counts = gather_counts(group, bytes.len())?;
    let rank = group.topology().rank();
    let total = counts_total(rank, &counts)?;
    if total > MAX_GATHERED_BYTES {
        return Err(protocol(
            rank,
            "the group",
            format!("{total} bytes to gather for '{name}' (at most {MAX_GATHERED_BYTES})"),
        ));
    }
    let mut all = vec![0u8; total];
    group.allgather(
        &Tensor::from_slice(name, bytes),
        &mut TensorMut::from_slice(name, &mut all),
        &counts,
    )?;
    Ok(split_by_counts(&all, &counts))
}
