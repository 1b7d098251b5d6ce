//! Which examples a job visits, and in what order: one permutation of the dataset per
//! epoch, drawn alike on every rank. The facade's samplers and hvd-data's loader both cut
//! their shares from it, so they agree on the order.

mod elastic;

pub use elastic::{CounterStore, ElasticSampler};

use crate::rng::SplitMix64;

/// The order in which epoch `epoch` visits `0..len`: shuffled from `seed + epoch` (the
/// same permutation on every rank), or as it is without a seed.
pub fn epoch_order(len: usize, seed: Option<u64>, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    if let Some(seed) = seed {
        let mut rng = SplitMix64::new(seed.wrapping_add(epoch));
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_order_is_a_permutation_that_changes_with_the_epoch() {
        let first = epoch_order(50, Some(9), 0);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_eq!(first, epoch_order(50, Some(9), 0));
        assert_ne!(first, epoch_order(50, Some(9), 1));
        assert_eq!(epoch_order(5, None, 3), vec![0, 1, 2, 3, 4]);
    }
}
