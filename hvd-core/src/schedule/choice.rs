//! Which algorithm runs a call: every rule that picks a schedule by operation, rank count
//! and size lives here. A transport only describes itself ([`Tuning`]); it never decides.
//!
//! Every rank of a group must pick the same algorithm for the same call, so a choice
//! depends only on what every rank knows alike: the operation, the group's size, the
//! call's bytes and the transport's tuning (an alltoall's ranks may send different
//! amounts, but it has one schedule).
//!
//! Two ranks are their own case: every collective is then one exchange between the pair
//! (a broadcast one send), whatever the size, and larger calls are only cut into frames
//! so that receiving overlaps sending. No tree, ring or doubling has a second round to
//! offer there.
//!
//! The numbers below were measured over TCP on loopback, 2 cores, in the same runs as
//! Open MPI 4.1's `coll/tuned` (its fixed decision rules pick, at 4 ranks, a linear
//! broadcast from 8 KiB to 1 MiB and a chain above; at 2 and 3 ranks a binary tree, which
//! is one send; Bruck or recursive doubling for small allgathers, the ring for large
//! ones; pairwise or linear alltoalls).

use crate::OpKind;

/// One schedule of [`crate::schedule`], by the shape of its exchanges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Allreduce in `log2 n` rounds, the whole buffer in each (non-powers of two fold the
    /// extra ranks in first): the fewest rounds, for latency-bound calls.
    RecursiveDoubling,
    /// Allreduce by recursive halving, then doubling (Rabenseifner's), on powers of two:
    /// the ring's bytes in `2 log2 n` rounds.
    Halving,
    /// Pipelined ring: the optimal bytes per rank in `n - 1` steps per pass (allreduce,
    /// allgather, reduce-scatter).
    Ring,
    /// Broadcast: the root sends to every rank itself, one hop.
    Flat,
    /// Broadcast down a binomial tree, `ceil(log2 n)` hops.
    Binomial,
    /// Broadcast along a chain from the root, forwarding each frame as it arrives.
    Chain,
    /// Allgather in one round: every rank sends its segment to every other.
    Direct,
    /// Allgather by recursive doubling on powers of two: `log2 n` rounds, each with one
    /// partner, doubling what it sends.
    GatherDoubling,
    /// Alltoall in `n - 1` steps: in step `d` to `rank + d`, from `rank - d`. One round
    /// with every peer at once measured no better on 4 ranks (against Open MPI: 1.22x,
    /// 1.13x and 1.18x at 4 KiB, 64 KiB and 1 MiB, where pairwise made 1.32x, 1.23x and
    /// 1.16x).
    Pairwise,
    /// Barrier by dissemination: `ceil(log2 n)` rounds of empty frames, after which all
    /// ranks leave together. Open MPI's linear barrier on 4 to 7 ranks (all to rank 0 and
    /// back) lets rank 0 leave first, which shortens a broadcast from rank 0 timed right
    /// after it (4 KiB on 4 ranks: 0.80x against Open MPI, 1.14x with it) but delays the
    /// ranks that leave last (alltoall 1.07x, 0.99x with it).
    Dissemination,
}

/// What a transport tells the choice about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Calls of at most this many bytes are latency-bound: they take the algorithms with
    /// the fewest rounds; larger ones those that move the fewest bytes.
    pub small_bytes: usize,
    /// The largest frame of a pipelined transfer.
    pub chunk_bytes: usize,
    /// Whether allreduces on more than two ranks halve from [`EARLY_HALVING_ABOVE`] on,
    /// below `small_bytes` too: right where a round costs little against its bytes (TCP),
    /// neutral where it was measured equal (libfabric's rxm, 64 KiB on 4 ranks).
    pub early_halving: bool,
}

/// On more than two ranks, allreduces above this many bytes halve even below
/// `small_bytes`, where [`Tuning::early_halving`] says so: recursive doubling sends the
/// whole buffer in every round. Measured on 4 ranks sharing 2 cores, same runs against
/// Open MPI (medians of 5 rounds): halving 1.25x and 1.61x at 64 and 96 KiB against
/// recursive doubling's 1.06x and 0.96x; recursive doubling 1.16x, 1.52x and 1.51x at
/// 40, 48 and 56 KiB against halving's 1.06x, 1.20x and 1.20x.
pub const EARLY_HALVING_ABOVE: usize = 56 << 10;

/// The largest allreduce that halves: above it the ring's frame-by-frame forwarding wins
/// (4 ranks, 64 MiB, same run against Open MPI: ring 1.65x, halving 1.41x; at 16 MiB
/// they tie).
pub const HALVING_MAX_BYTES: usize = 8 << 20;

/// The most ranks a small broadcast reaches straight from the root; larger groups take
/// the binomial tree, whose depth grows with `log2 n` where the root's sends grow with
/// `n`. Measured against Open MPI: 4 KiB on 4 ranks flat 1.41x, binomial 0.60x; on 8
/// ranks 1.58x against 1.30x (64 KiB 2.11x against 1.39x); even on 3 ranks.
pub const FLAT_MAX_RANKS: usize = 8;

/// The most bytes the root of a flat broadcast sends in all, above the small-call limit:
/// beyond it the chain, whose root sends the message once, wins. Measured on 4 ranks
/// against Open MPI (which sends linearly from 8 KiB to 1 MiB there): flat 1.21x, 1.47x
/// and 1.64x at 256 KiB, 1 MiB and 4 MiB against the chain's 0.82x, 1.19x and 1.44x; the
/// chain 1.22x at 16 MiB against flat's 1.14x.
pub const FLAT_MAX_ROOT_BYTES: usize = 12 << 20;

/// The largest allgather (the gathered result) that goes by recursive doubling on a
/// power-of-two group above 2 rather than in one direct round. Measured against Open MPI:
/// 4 ranks, 4 KiB doubling 1.40x, direct 1.07x; 64 KiB 1.27x against 0.95x; 256 KiB
/// 1.33x against 1.60x; 8 ranks, 4 KiB 1.04x against 0.59x.
pub const GATHER_DOUBLING_MAX_BYTES: usize = 128 << 10;

/// The algorithm for `op` on `size` ranks over `bytes` (the reduced buffer, the
/// broadcast message, the gathered result, one rank's alltoall input).
pub fn choose(op: OpKind, size: usize, bytes: usize, tuning: &Tuning) -> Algorithm {
    let small = bytes <= tuning.small_bytes;
    let power_of_two = size > 1 && size.is_power_of_two();
    match op {
        OpKind::Allreduce => {
            let halving_above = if size > 2 && tuning.early_halving {
                tuning.small_bytes.min(EARLY_HALVING_ABOVE)
            } else {
                tuning.small_bytes
            };
            if power_of_two && bytes > halving_above && bytes <= HALVING_MAX_BYTES {
                Algorithm::Halving
            } else if small {
                Algorithm::RecursiveDoubling
            } else {
                Algorithm::Ring
            }
        }
        OpKind::Broadcast => broadcast(size, bytes, small),
        OpKind::Allgather
            if small && size > 2 && power_of_two && bytes <= GATHER_DOUBLING_MAX_BYTES =>
        {
            Algorithm::GatherDoubling
        }
        OpKind::Allgather if small => Algorithm::Direct,
        OpKind::Allgather | OpKind::Reducescatter => Algorithm::Ring,
        OpKind::Alltoall => Algorithm::Pairwise,
        OpKind::Barrier => Algorithm::Dissemination,
    }
}

/// A broadcast goes straight from the root while the root's sends stay few and short:
/// one send on two ranks, whatever its size.
fn broadcast(size: usize, bytes: usize, small: bool) -> Algorithm {
    let root_sends = (size - 1).saturating_mul(bytes);
    if size <= 2 || (size <= FLAT_MAX_RANKS && (small || root_sends <= FLAT_MAX_ROOT_BYTES)) {
        Algorithm::Flat
    } else if small {
        Algorithm::Binomial
    } else {
        Algorithm::Chain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: Tuning = Tuning {
        small_bytes: 256 << 10,
        chunk_bytes: 512 << 10,
        early_halving: true,
    };

    fn pick(op: OpKind, size: usize, bytes: usize) -> Algorithm {
        choose(op, size, bytes, &TCP)
    }

    #[test]
    fn small_calls_take_the_fewest_rounds_and_large_ones_the_fewest_bytes() {
        use Algorithm::*;
        assert_eq!(pick(OpKind::Allreduce, 3, 4 << 10), RecursiveDoubling);
        assert_eq!(pick(OpKind::Allreduce, 3, 1 << 20), Ring);
        assert_eq!(pick(OpKind::Allgather, 3, 4 << 10), Direct);
        assert_eq!(pick(OpKind::Allgather, 4, 4 << 10), GatherDoubling);
        assert_eq!(pick(OpKind::Allgather, 4, 1 << 20), Ring);
        assert_eq!(pick(OpKind::Broadcast, 16, 4 << 10), Binomial);
        assert_eq!(pick(OpKind::Reducescatter, 4, 4 << 10), Ring);
        assert_eq!(pick(OpKind::Barrier, 5, 0), Dissemination);
    }

    #[test]
    fn allreduce_halves_between_its_floor_and_its_ceiling_on_powers_of_two() {
        use Algorithm::*;
        assert_eq!(
            pick(OpKind::Allreduce, 4, EARLY_HALVING_ABOVE),
            RecursiveDoubling
        );
        assert_eq!(pick(OpKind::Allreduce, 4, EARLY_HALVING_ABOVE + 4), Halving);
        assert_eq!(pick(OpKind::Allreduce, 4, HALVING_MAX_BYTES), Halving);
        assert_eq!(pick(OpKind::Allreduce, 4, HALVING_MAX_BYTES + 4), Ring);
        assert_eq!(
            pick(OpKind::Allreduce, 6, 1 << 20),
            Ring,
            "not a power of two"
        );
        assert_eq!(
            pick(OpKind::Allreduce, 3, 1 << 20),
            Ring,
            "not a power of two"
        );
        assert_eq!(
            pick(OpKind::Allreduce, 1, 1 << 20),
            Ring,
            "nothing to halve"
        );
        let rxm = Tuning {
            early_halving: false,
            ..TCP
        };
        assert_eq!(
            choose(OpKind::Allreduce, 4, 64 << 10, &rxm),
            RecursiveDoubling,
            "halving only where it was measured to win"
        );
        assert_eq!(choose(OpKind::Allreduce, 4, 1 << 20, &rxm), Halving);
    }

    #[test]
    fn two_ranks_exchange_once_whatever_the_size() {
        use Algorithm::*;
        for bytes in [4, 4 << 10, 1 << 20, 64 << 20] {
            assert_eq!(pick(OpKind::Broadcast, 2, bytes), Flat, "{bytes} bytes");
            assert_eq!(pick(OpKind::Alltoall, 2, bytes), Pairwise, "{bytes} bytes");
            assert!(
                matches!(pick(OpKind::Allgather, 2, bytes), Direct | Ring),
                "{bytes} bytes: a ring of two is one exchange"
            );
        }
    }

    #[test]
    fn a_flat_broadcast_stops_where_the_roots_sends_grow_long() {
        use Algorithm::*;
        assert_eq!(pick(OpKind::Broadcast, 4, 4 << 20), Flat);
        assert_eq!(pick(OpKind::Broadcast, 4, 16 << 20), Chain);
        assert_eq!(pick(OpKind::Broadcast, 8, 1 << 20), Flat);
        assert_eq!(pick(OpKind::Broadcast, 8, 4 << 20), Chain);
        assert_eq!(pick(OpKind::Broadcast, 9, 1 << 20), Chain);
    }

    #[test]
    fn every_rank_count_and_size_has_a_rule() {
        for op in OpKind::ALL {
            for size in 1..=9 {
                for bytes in [0, 4, 4 << 10, 256 << 10, 1 << 20, 64 << 20] {
                    let algorithm = pick(op, size, bytes);
                    let fits = match op {
                        OpKind::Allreduce => matches!(
                            algorithm,
                            Algorithm::RecursiveDoubling | Algorithm::Halving | Algorithm::Ring
                        ),
                        OpKind::Broadcast => matches!(
                            algorithm,
                            Algorithm::Flat | Algorithm::Binomial | Algorithm::Chain
                        ),
                        OpKind::Allgather => matches!(
                            algorithm,
                            Algorithm::Direct | Algorithm::GatherDoubling | Algorithm::Ring
                        ),
                        OpKind::Alltoall => algorithm == Algorithm::Pairwise,
                        OpKind::Reducescatter => algorithm == Algorithm::Ring,
                        OpKind::Barrier => algorithm == Algorithm::Dissemination,
                    };
                    assert!(fits, "{op} on {size} ranks, {bytes} bytes: {algorithm:?}");
                }
            }
        }
    }
}
