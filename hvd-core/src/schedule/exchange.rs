//! Direct exchanges over the full mesh: alltoall, and allgather of small messages (one
//! round instead of `n - 1` ring steps).
//!
//! Alltoall is the pairwise exchange: in step `d` every rank sends to `rank + d` and
//! receives from `rank - d`, so each rank has one partner per direction at a time and no
//! rank is flooded by all the others at once (which matters on a real network).

use std::ops::Range;

use super::layout::Layout;
use super::phases::{Phase, Phases};
use super::{Action, Recv};

/// Sends `outgoing[p]` to every peer `p` and receives `incoming[p]` from it, one step per
/// distance, in frames of at most `chunk_bytes`.
pub fn alltoall(
    rank: usize,
    size: usize,
    outgoing: &[Range<usize>],
    incoming: &[Range<usize>],
    layout: &Layout<'_>,
    chunk_bytes: usize,
) -> Phases {
    let chunks = |range: &Range<usize>| {
        layout.split(
            range.clone(),
            range.len().div_ceil(chunk_bytes.max(1)).max(1),
        )
    };
    let mut phases = Vec::new();
    for distance in 1..size {
        let mut phase = Phase::new();
        let to = (rank + distance) % size;
        let from = (rank + size - distance) % size;
        for chunk in chunks(&outgoing[to]) {
            phase = phase.send(to, chunk);
        }
        for chunk in chunks(&incoming[from]) {
            phase = phase.recv(from, Recv::new(chunk, Action::Place));
        }
        phases.push(phase);
    }
    Phases::new(size, phases)
}

/// Sends this rank's segment to every peer and receives theirs, in one round.
pub fn allgather(rank: usize, size: usize, segments: &[Range<usize>]) -> Phases {
    let mut phase = Phase::new();
    for distance in 1..size {
        let to = (rank + distance) % size;
        let from = (rank + size - distance) % size;
        phase = phase
            .send(to, segments[rank].clone())
            .recv(from, Recv::new(segments[from].clone(), Action::Place));
    }
    Phases::new(size, vec![phase])
}

#[cfg(test)]
mod tests {
    use crate::DType;

    use super::*;
    use crate::schedule::{Data, Done, Schedule};

    #[test]
    fn alltoall_goes_pairwise_in_frames_of_at_most_the_chunk_size() {
        let mut bytes = vec![0u8; 40];
        let mut layout = Layout::new();
        layout.push(DType::F32, &mut bytes);
        let outgoing = [0..0, 0..20, 20..20];
        let incoming = [20..24, 24..24, 24..40];
        let mut plan = alltoall(1, 3, &outgoing, &incoming, &layout, 8);
        assert_eq!(plan.peers(), [0, 2]);
        assert_eq!(plan.next_send(0), None, "rank 0 comes in the second step");
        assert_eq!(
            plan.next_send(2),
            Some(20..20),
            "a zero count is one empty frame"
        );
        assert_eq!(plan.next_recv(0).map(|r| r.range), Some(20..24));
        let mut data = Data {
            layout: &mut layout,
            stashes: &[],
        };
        plan.complete(Done::Sent(2), &mut data).unwrap();
        plan.complete(Done::Received(0), &mut data).unwrap();
        assert_eq!(plan.next_send(0), Some(0..0));
        assert_eq!(plan.next_recv(2).map(|r| r.range), Some(24..32));
        assert_eq!(plan.next_recv(2).map(|r| r.range), Some(32..40));
        assert_eq!(plan.next_recv(2), None);
    }
}
