//! Gathering variable-length bytes on rank 0 with the trait's own collectives.

use hvd_core::{Collective, Result, Tensor, TensorMut, gather_counts, split_by_counts};

/// Every rank's `bytes`, in rank order, on rank 0 (`Some`); `None` on the other ranks.
/// Collective.
///
/// Built on an allgather of the lengths and an alltoall in which every rank sends only to
/// rank 0, so each rank's events cross the network once, to the one rank that writes
/// them, where `allgather_bytes` would send every rank everyone's events.
pub(crate) fn gather_bytes(
    group: &dyn Collective,
    name: &str,
    bytes: &[u8],
) -> Result<Option<Vec<Vec<u8>>>> {
    let (rank, size) = (group.topology().rank(), group.topology().size());
    let counts = gather_counts(group, bytes.len())?;
    let mut send_counts = vec![0; size];
    send_counts[0] = bytes.len();
    let recv_counts = if rank == 0 { counts } else { vec![0; size] };
    let mut all = vec![0u8; recv_counts.iter().sum()];
    group.alltoall(
        &Tensor::from_slice(name, bytes),
        &send_counts,
        &mut TensorMut::from_slice(name, &mut all),
        &recv_counts,
    )?;
    if rank != 0 {
        return Ok(None);
    }
    Ok(Some(split_by_counts(&all, &recv_counts)))
}
