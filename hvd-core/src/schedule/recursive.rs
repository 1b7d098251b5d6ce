//! Recursive doubling: the latency-optimal allreduce for small messages.
//!
//! With `p` the largest power of two not above `n`, the first `2 (n - p)` ranks pair up:
//! each even one hands its data to the odd one after it and waits for the result, which
//! leaves `p` ranks. In round `m = 1, 2, 4, ..` each of those exchanges its whole buffer
//! with the rank whose (renumbered) index differs in bit `m` and combines the two, so after
//! `log2 p` rounds all hold the full result. Every combination is commutative, so both
//! partners compute bit-identical values. A round reduces only after its own send has
//! left, because the send reads the buffer the reduction writes.

use crate::Reduction;

use super::phases::{Phase, Phases, Then};
use super::{Action, Recv};

/// The phases of a recursive-doubling allreduce of `len` bytes.
pub fn allreduce(rank: usize, size: usize, len: usize, reduction: Reduction) -> Phases {
    let all = 0..len;
    let reduce = |from: usize, finish: bool| Then::Reduce {
        from,
        into: all.clone(),
        reduction,
        ranks: size,
        finish,
    };
    let p = 1 << size.ilog2();
    let extra = size - p;
    let mut phases = Vec::new();
    let index = if rank < 2 * extra {
        if rank.is_multiple_of(2) {
            phases.push(Phase::new().send(rank + 1, all.clone()));
            phases.push(Phase::new().recv(rank + 1, Recv::new(all, Action::Place)));
            return Phases::new(size, phases);
        }
        phases.push(
            Phase::new()
                .recv(rank - 1, Recv::new(all.clone(), Action::Stash))
                .then(reduce(rank - 1, false)),
        );
        rank / 2
    } else {
        rank - extra
    };
    let rank_of = |index: usize| {
        if index < extra {
            2 * index + 1
        } else {
            index + extra
        }
    };
    let mut bit = 1;
    while bit < p {
        let partner = rank_of(index ^ bit);
        let last = bit * 2 == p;
        phases.push(
            Phase::new()
                .send(partner, all.clone())
                .recv(partner, Recv::new(all.clone(), Action::Stash))
                .then(reduce(partner, last)),
        );
        bit *= 2;
    }
    if rank < 2 * extra {
        phases.push(Phase::new().send(rank - 1, all));
    }
    Phases::new(size, phases)
}

#[cfg(test)]
mod tests {
    use crate::ReduceOp;

    use super::*;
    use crate::schedule::Schedule;

    #[test]
    fn three_ranks_fold_one_and_double_the_rest() {
        let r = Reduction::new(ReduceOp::Sum);
        assert_eq!(allreduce(0, 3, 8, r).peers(), [1]);
        assert_eq!(allreduce(1, 3, 8, r).peers(), [0, 2]);
        assert_eq!(allreduce(2, 3, 8, r).peers(), [1]);
    }

    #[test]
    fn partners_differ_in_one_bit_of_the_renumbered_rank() {
        let r = Reduction::new(ReduceOp::Sum);
        assert_eq!(allreduce(5, 8, 8, r).peers(), [1, 4, 7]);
        assert_eq!(allreduce(6, 7, 8, r).peers(), [3, 5]);
        assert_eq!(allreduce(1, 7, 8, r).peers(), [0, 3, 5]);
    }
}
