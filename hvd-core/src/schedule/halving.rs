//! Recursive halving and doubling (Rabenseifner's allreduce) for a power-of-two number of
//! ranks: a reduce-scatter by recursive halving, then an allgather by recursive doubling.
//!
//! In halving step `d = p/2, p/4, .., 1` each rank splits the range it still reduces in
//! two, sends its partner `rank ^ d` the half the partner keeps and reduces the other half
//! with the partner's, as it arrives; after `log2 p` steps each rank owns `1/p` of the
//! result. The doubling steps retrace the partners in reverse, each rank sending all it
//! owns and receiving the partner's part. Each rank moves `2 (p - 1) / p` of the data, as
//! in a ring, but in `2 log2 p` rounds instead of `2 (p - 1)`: fewer points where a rank
//! waits for another, which is what medium messages pay for when ranks share cores.
//! Partners reduce disjoint halves, so nothing a rank sends is being written.

use std::ops::Range;

use super::layout::Layout;
use super::phases::{Phase, Phases};
use super::{Action, Recv};

/// The phases of a halving-doubling allreduce over all of `layout`, in frames of at most
/// `chunk_bytes`; `size` must be a power of two.
pub fn allreduce(rank: usize, size: usize, layout: &Layout<'_>, chunk_bytes: usize) -> Phases {
    debug_assert!(size.is_power_of_two(), "halving needs a power of two");
    let chunks = |range: &Range<usize>| layout.frames(range.clone(), chunk_bytes);
    let mut own = 0..layout.len();
    let mut given = Vec::new();
    let mut phases = Vec::new();
    let mut distance = size / 2;
    while distance > 0 {
        let partner = rank ^ distance;
        let halves = layout.split(own.clone(), 2);
        let (keep, give) = if rank & distance == 0 {
            (halves[0].clone(), halves[1].clone())
        } else {
            (halves[1].clone(), halves[0].clone())
        };
        // The last halving step brings the last contribution to what this rank keeps.
        let action = if distance == 1 {
            Action::ReduceFinish
        } else {
            Action::Reduce
        };
        let mut phase = Phase::new();
        for chunk in chunks(&give) {
            phase = phase.send(partner, chunk);
        }
        for chunk in chunks(&keep) {
            phase = phase.recv(partner, Recv::new(chunk, action));
        }
        phases.push(phase);
        given.push((partner, give));
        own = keep;
        distance /= 2;
    }
    for (partner, theirs) in given.into_iter().rev() {
        let mut phase = Phase::new();
        for chunk in chunks(&own) {
            phase = phase.send(partner, chunk);
        }
        for chunk in chunks(&theirs) {
            phase = phase.recv(partner, Recv::new(chunk, Action::Place));
        }
        phases.push(phase);
        own = own.start.min(theirs.start)..own.end.max(theirs.end);
    }
    Phases::new(size, phases)
}

#[cfg(test)]
mod tests {
    use crate::{DType, ReduceOp, Reduction};

    use super::*;
    use crate::schedule::{Schedule, simulate};

    /// Runs `size` ranks' schedules over in-memory layouts of f32 values.
    fn run(values: Vec<Vec<f32>>, chunk_bytes: usize, op: ReduceOp) -> Vec<Vec<f32>> {
        let mut ranks: Vec<Vec<(DType, Vec<u8>)>> = values
            .iter()
            .map(|v| vec![(DType::F32, v.iter().flat_map(|x| x.to_ne_bytes()).collect())])
            .collect();
        run_regions(&mut ranks, chunk_bytes, op);
        ranks
            .iter()
            .map(|regions| {
                regions[0]
                    .1
                    .chunks_exact(4)
                    .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
                    .collect()
            })
            .collect()
    }

    /// Runs halving on every rank over in-memory layouts of its regions (tensors of any
    /// dtype).
    fn run_regions(ranks: &mut [Vec<(DType, Vec<u8>)>], chunk_bytes: usize, op: ReduceOp) {
        let size = ranks.len();
        let mut layouts: Vec<Layout<'_>> = ranks
            .iter_mut()
            .map(|regions| {
                let mut layout = Layout::new();
                for (dtype, bytes) in regions.iter_mut() {
                    layout.push(*dtype, bytes);
                }
                layout
            })
            .collect();
        let mut plans: Vec<Box<dyn Schedule>> = (0..size)
            .map(|r| Box::new(allreduce(r, size, &layouts[r], chunk_bytes)) as Box<dyn Schedule>)
            .collect();
        simulate::run(&mut plans, &mut layouts, Reduction::new(op));
    }

    #[test]
    fn every_rank_ends_with_the_whole_sum() {
        for (size, len, chunk) in [(2, 10, 1 << 20), (4, 1000, 64), (8, 37, 8), (4, 3, 4)] {
            let values: Vec<Vec<f32>> = (0..size)
                .map(|r| (0..len).map(|i| (r * 1000 + i) as f32).collect())
                .collect();
            let expected: Vec<f32> = (0..len)
                .map(|i| (0..size).map(|r| (r * 1000 + i) as f32).sum())
                .collect();
            for result in run(values, chunk, ReduceOp::Sum) {
                assert_eq!(
                    result, expected,
                    "{size} ranks, {len} values, {chunk}-byte chunks"
                );
            }
        }
    }

    #[test]
    fn a_batch_of_mixed_dtypes_is_cut_on_element_boundaries() {
        // An f64, an f32 and an i32 tensor: halving cuts fall inside regions of
        // different element sizes, and 9-byte chunks cut no element either.
        for (size, chunk) in [(2usize, 9), (4, 9), (8, 1 << 20)] {
            let mut ranks: Vec<Vec<(DType, Vec<u8>)>> = (0..size)
                .map(|r| {
                    let f64s: Vec<u8> = (0..5)
                        .flat_map(|i| (r as f64 + i as f64 * 0.5).to_ne_bytes())
                        .collect();
                    let f32s: Vec<u8> = (0..7)
                        .flat_map(|i| (r as f32 * 2.0 + i as f32).to_ne_bytes())
                        .collect();
                    let i32s: Vec<u8> = (0..3)
                        .flat_map(|i| (r as i32 * 10 - i).to_ne_bytes())
                        .collect();
                    vec![(DType::F64, f64s), (DType::F32, f32s), (DType::I32, i32s)]
                })
                .collect();
            run_regions(&mut ranks, chunk, ReduceOp::Sum);
            let n = size as f64;
            let ranks_sum = n * (n - 1.0) / 2.0;
            let f64s: Vec<u8> = (0..5)
                .flat_map(|i| (ranks_sum + n * i as f64 * 0.5).to_ne_bytes())
                .collect();
            let f32s: Vec<u8> = (0..7)
                .flat_map(|i| (ranks_sum as f32 * 2.0 + n as f32 * i as f32).to_ne_bytes())
                .collect();
            let i32s: Vec<u8> = (0..3)
                .flat_map(|i| (ranks_sum as i32 * 10 - size as i32 * i).to_ne_bytes())
                .collect();
            for regions in &ranks {
                assert_eq!(
                    regions[0].1, f64s,
                    "f64 on {size} ranks, {chunk}-byte chunks"
                );
                assert_eq!(
                    regions[1].1, f32s,
                    "f32 on {size} ranks, {chunk}-byte chunks"
                );
                assert_eq!(
                    regions[2].1, i32s,
                    "i32 on {size} ranks, {chunk}-byte chunks"
                );
            }
        }
    }

    #[test]
    fn an_average_is_finished_exactly_once() {
        let values: Vec<Vec<f32>> = (0..4).map(|r| vec![4.0 * r as f32; 9]).collect();
        for result in run(values, 8, ReduceOp::Average) {
            assert_eq!(result, vec![6.0; 9]);
        }
    }

    #[test]
    fn partners_differ_in_one_bit_and_frames_respect_the_chunk_size() {
        let mut bytes = vec![0u8; 64];
        let mut layout = Layout::new();
        layout.push(DType::F32, &mut bytes);
        let mut plan = allreduce(1, 4, &layout, 16);
        assert_eq!(plan.peers(), [0, 3]);
        // Rank 1 (bit 2 clear) keeps the lower half in the first step, against rank 3.
        assert_eq!(plan.next_send(3), Some(32..48));
        assert_eq!(plan.next_send(3), Some(48..64));
        assert_eq!(plan.next_send(3), None);
        assert_eq!(plan.next_send(0), None, "rank 0 comes in the second step");
        assert_eq!(
            plan.next_recv(3).map(|r| (r.range, r.action)),
            Some((0..16, Action::Reduce))
        );
    }
}
