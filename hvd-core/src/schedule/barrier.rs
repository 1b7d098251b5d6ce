//! The dissemination barrier: in round `k` every rank signals rank `r + 2^k` and waits for
//! rank `r - 2^k`, so after `ceil(log2 n)` rounds every rank has heard, directly or not,
//! from every other. It works for any group size and uses empty frames.

use super::phases::{Phase, Phases};
use super::{Action, Recv};

pub fn barrier(rank: usize, size: usize) -> Phases {
    let mut phases = Vec::new();
    let mut distance = 1;
    while distance < size {
        phases.push(Phase::new().send((rank + distance) % size, 0..0).recv(
            (rank + size - distance) % size,
            Recv::new(0..0, Action::Place),
        ));
        distance *= 2;
    }
    Phases::new(size, phases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;

    #[test]
    fn rounds_reach_every_rank() {
        assert_eq!(barrier(0, 5).peers(), [1, 2, 3, 4]);
        assert!(barrier(0, 1).is_done());
    }
}
