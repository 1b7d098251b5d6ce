//! Clock alignment: how far each rank's clock is from rank 0's, with a bound on the error.
//!
//! # Method
//! A barrier gives a moment `M` that every rank can bracket on its own clock: `M` is when
//! the last rank entered, so every rank entered before `M` and left after it. Rank `r`
//! reads its clock right before (`enter_r`) and right after (`exit_r`) the barrier, so
//! `enter_r <= M_r <= exit_r`, where `M_r` is `M` on rank `r`'s clock. The offset of rank
//! `r` from rank 0, `M_r - M_0`, therefore lies in
//!
//! ```text
//! [enter_r - exit_0, exit_r - enter_0]
//! ```
//!
//! Every round of barrier gives such an interval and the true offset lies in all of them,
//! so their intersection bounds it; the estimate is the intersection's midpoint and the
//! error its half-width. This is a bound, not a statistic: it holds whatever the network
//! did, as long as the barrier is one (no rank leaves before the last enters) and the
//! clocks run at the same rate during the rounds. A round is tight on one side when rank
//! 0 or rank `r` is the last to arrive, so after a few rounds the error is about one
//! barrier's latency (tens of microseconds over TCP on one switch; a few microseconds
//! between threads).
//!
//! Monotonic clocks of different hosts drift apart by a few parts per million; over a long
//! job that adds up, so the runtime may measure again (every flush interval, say) and hand
//! the new offset to the recorder.

use hvd_core::{Collective, Result, Tensor, TensorMut};

use crate::clock;

/// One rank's clock offset from rank 0: `offset_ns` is what rank `r`'s clock reads minus
/// what rank 0's reads at the same moment; the true offset is within `error_ns` of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockOffset {
    pub offset_ns: i64,
    pub error_ns: u64,
}

/// The outcome of [`align_clocks`]: every rank's offset, the same on every rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockAlignment {
    rank: usize,
    offsets: Vec<ClockOffset>,
}

impl ClockAlignment {
    /// This rank's offset: what to hand to
    /// [`Recorder::set_clock_offset`](crate::Recorder::set_clock_offset).
    pub fn local(&self) -> ClockOffset {
        self.offsets[self.rank]
    }

    /// Every rank's offset, in rank order (rank 0's is zero).
    pub fn ranks(&self) -> &[ClockOffset] {
        &self.offsets
    }

    /// The largest error bound over all ranks, the figure to report.
    pub fn max_error_ns(&self) -> u64 {
        self.offsets.iter().map(|o| o.error_ns).max().unwrap_or(0)
    }
}

/// Measures every rank's clock offset from rank 0 with `rounds` barriers (at least one;
/// 10 to 20 is plenty) and one allgather of the readings; see the
/// [crate docs](crate#clock-alignment-and-its-error).
/// Collective: every rank of `group` calls it at the same point. Through a recording
/// [`Timeline`](crate::Timeline), its barriers show on the `barrier` row; measure before
/// [`Recorder::start`](crate::Recorder::start), or on the unwrapped group, to keep them out.
pub fn align_clocks(group: &dyn Collective, rounds: usize) -> Result<ClockAlignment> {
    let rounds = rounds.max(1);
    // The first barrier after start-up can include connection set-up; it brackets nothing.
    group.barrier()?;
    let mut readings = Vec::with_capacity(2 * rounds);
    for _ in 0..rounds {
        let enter = clock::now_ns();
        group.barrier()?;
        let exit = clock::now_ns();
        readings.extend([enter as i64, exit as i64]);
    }
    let size = group.topology().size();
    let mut all = vec![0i64; size * readings.len()];
    group.allgather(
        &Tensor::from_slice("hvd.timeline.clock", &readings),
        &mut TensorMut::from_slice("hvd.timeline.clock", &mut all),
        &vec![readings.len(); size],
    )?;
    let per_rank: Vec<&[i64]> = all.chunks_exact(readings.len()).collect();
    let offsets = per_rank
        .iter()
        .enumerate()
        .map(|(rank, r)| bracket(rank, per_rank[0], r))
        .collect();
    Ok(ClockAlignment {
        rank: group.topology().rank(),
        offsets,
    })
}

/// The offset of the rank whose `(enter, exit)` readings are `other` from the rank whose
/// readings are `root`, as the intersection of the rounds' intervals.
fn bracket(rank: usize, root: &[i64], other: &[i64]) -> ClockOffset {
    let rounds = root.chunks_exact(2).zip(other.chunks_exact(2));
    let (mut lo, mut hi) = (i64::MIN, i64::MAX);
    for (r0, r) in rounds {
        lo = lo.max(r[0].saturating_sub(r0[1]));
        hi = hi.min(r[1].saturating_sub(r0[0]));
    }
    if lo > hi {
        // Impossible for a true barrier on clocks that keep the same rate.
        tracing::warn!(
            rank,
            lower_ns = lo,
            upper_ns = hi,
            "timeline clock alignment: the barrier rounds disagree (a clock jumped or the \
             barrier let a rank out early); using the midpoint and the disagreement as error"
        );
    }
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    // Midpoint without overflow; rounding up the half-width keeps the true offset within
    // the error even when the width is odd.
    let offset_ns = lo + (hi - lo) / 2;
    ClockOffset {
        offset_ns,
        error_ns: (hi - lo).unsigned_abs().div_ceil(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_intervals_of_all_rounds_are_intersected() {
        // Rank 1's clock reads 1000 ns more than rank 0's. Round 1: rank 0 arrives last
        // (at 100 on its clock), both leave at 110; round 2: rank 1 arrives last (at
        // 1200 = 200 on rank 0's clock), both leave at 205.
        let root = [100, 110, 150, 205];
        let other = [1050, 1110, 1200, 1205];
        let offset = bracket(1, &root, &other);
        // Round 1: [1050-110, 1110-100] = [940, 1010]; round 2: [1200-205, 1205-150] =
        // [995, 1055]; together [995, 1010].
        assert_eq!(
            offset,
            ClockOffset {
                offset_ns: 1002,
                error_ns: 8
            }
        );
        assert!((offset.offset_ns - 1000).unsigned_abs() <= offset.error_ns);
    }

    #[test]
    fn a_rank_is_at_offset_zero_from_itself() {
        let own = [10, 30, 40, 45];
        assert_eq!(
            bracket(0, &own, &own),
            ClockOffset {
                offset_ns: 0,
                error_ns: 5
            }
        );
    }
}
