//! Direct exchanges over the full mesh: alltoall, and allgather of small messages (one
//! round instead of `n - 1` ring steps, or `log2 n` rounds by recursive doubling, which
//! need fewer ranks to be running at once).
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
    let phases = (1..size)
        .map(|distance| {
            alltoall_step(
                rank,
                size,
                distance,
                outgoing,
                incoming,
                layout,
                chunk_bytes,
            )
        })
        .collect();
    Phases::new(size, phases)
}

/// Step `distance` of an alltoall: to `rank + distance`, from `rank - distance`.
fn alltoall_step(
    rank: usize,
    size: usize,
    distance: usize,
    outgoing: &[Range<usize>],
    incoming: &[Range<usize>],
    layout: &Layout<'_>,
    chunk_bytes: usize,
) -> Phase {
    let chunks = |range: &Range<usize>| layout.frames(range.clone(), chunk_bytes);
    let to = (rank + distance) % size;
    let from = (rank + size - distance) % size;
    let mut phase = Phase::new();
    for chunk in chunks(&outgoing[to]) {
        phase = phase.send(to, chunk);
    }
    for chunk in chunks(&incoming[from]) {
        phase = phase.recv(from, Recv::new(chunk, Action::Place));
    }
    phase
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

/// Recursive doubling: in step `d = 1, 2, 4, ..` each rank sends the `d` segments it
/// holds to `rank ^ d` and receives that rank's `d`; `size` must be a power of two.
pub fn allgather_doubling(rank: usize, size: usize, segments: &[Range<usize>]) -> Phases {
    let held = |index: usize, distance: usize| {
        let first = index / distance * distance;
        segments[first].start..segments[first + distance - 1].end
    };
    let mut phases = Vec::new();
    let mut distance = 1;
    while distance < size {
        let partner = rank ^ distance;
        phases.push(
            Phase::new()
                .send(partner, held(rank, distance))
                .recv(partner, Recv::new(held(partner, distance), Action::Place)),
        );
        distance *= 2;
    }
    Phases::new(size, phases)
}

#[cfg(test)]
mod tests {
    use crate::DType;

    use super::*;
    use crate::schedule::{Data, Done, Schedule};

    #[test]
    fn doubling_allgather_gathers_uneven_and_empty_segments_on_every_rank() {
        for counts in [vec![3, 0, 5, 1], vec![1, 2, 0, 4, 3, 0, 7, 2]] {
            let size = counts.len();
            let segments = crate::schedule::blocks(0, &counts, 1);
            let total = segments[size - 1].end;
            // Rank r holds only its own segment, of bytes r + 1.
            let mut buffers: Vec<Vec<u8>> = (0..size)
                .map(|r| {
                    let mut b = vec![0u8; total];
                    b[segments[r].clone()].fill(r as u8 + 1);
                    b
                })
                .collect();
            let mut layouts = crate::schedule::simulate::byte_layouts(&mut buffers);
            let mut plans: Vec<Box<dyn Schedule>> = (0..size)
                .map(|r| Box::new(allgather_doubling(r, size, &segments)) as Box<dyn Schedule>)
                .collect();
            let sum = crate::Reduction::new(crate::ReduceOp::Sum);
            crate::schedule::simulate::run(&mut plans, &mut layouts, sum);
            drop(layouts);
            let expected: Vec<u8> = (0..size)
                .flat_map(|r| std::iter::repeat_n(r as u8 + 1, counts[r]))
                .collect();
            for (rank, buffer) in buffers.iter().enumerate() {
                assert_eq!(
                    buffer, &expected,
                    "rank {rank} of {size}, counts {counts:?}"
                );
            }
        }
    }

    #[test]
    fn doubling_allgather_sends_what_it_holds_to_one_partner_a_step() {
        // Segments of 4 ranks of 1, 2, 3 and 4 bytes.
        let segments = [0..1, 1..3, 3..6, 6..10];
        let mut plan = allgather_doubling(2, 4, &segments);
        assert_eq!(plan.peers(), [0, 3]);
        assert_eq!(plan.next_send(3), Some(3..6));
        assert_eq!(plan.next_recv(3).map(|r| r.range), Some(6..10));
        assert_eq!(plan.next_send(0), None, "rank 0 comes in the second step");
        let mut layout = Layout::new();
        let mut data = Data {
            layout: &mut layout,
            stashes: &[],
        };
        plan.complete(Done::Sent(3), &mut data).unwrap();
        plan.complete(Done::Received(3), &mut data).unwrap();
        assert_eq!(
            plan.next_send(0),
            Some(3..10),
            "then both segments it holds"
        );
        assert_eq!(plan.next_recv(0).map(|r| r.range), Some(0..3));
    }

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
