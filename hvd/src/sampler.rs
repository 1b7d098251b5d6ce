//! Which examples each rank trains on: every rank its own shard of the dataset, a fresh
//! shuffle each epoch from a seed all ranks share.

use hvd_core::{Error, Result};

use crate::ProcessSet;
use hvd_core::sampler::epoch_order;

/// Splits the indices `0..len` of a dataset between the ranks of a job, like PyTorch's
/// `DistributedSampler` that Horovod uses.
///
/// Each epoch, the indices are shuffled from `seed + epoch` (the same permutation on
/// every rank) and rank `r` of `n` takes positions `r, r + n, r + 2n, ...` of it: shards
/// that are disjoint and together cover the dataset.
///
/// Every rank must run the same number of steps, or the ranks that finish first leave
/// the others waiting in an allreduce. So when `len` does not divide by the number of
/// ranks, the permutation is padded by wrapping around to its start (a few examples are
/// seen twice in that epoch); with [`drop_last`](Self::drop_last) the tail is dropped
/// instead (a few examples are not seen that epoch; which ones changes every epoch).
#[derive(Clone, Debug)]
pub struct DistributedSampler {
    len: usize,
    rank: usize,
    size: usize,
    seed: u64,
    shuffle: bool,
    drop_last: bool,
    epoch: u64,
}

impl DistributedSampler {
    /// A sampler of `len` examples for rank `rank` of `size`: shuffled, seed 0, padded.
    pub fn new(len: usize, rank: usize, size: usize) -> Result<Self> {
        if rank >= size {
            return Err(Error::Config {
                name: "DistributedSampler rank".into(),
                value: rank.to_string(),
                expected: format!("a rank below the job size {size}"),
            });
        }
        Ok(DistributedSampler {
            len,
            rank,
            size,
            seed: 0,
            shuffle: true,
            drop_last: false,
            epoch: 0,
        })
    }

    /// A sampler for this rank of `set` (`&hvd` for the whole job).
    pub fn for_set(len: usize, set: &ProcessSet) -> Result<Self> {
        let topology = set.topology().ok_or_else(|| Error::Config {
            name: "DistributedSampler process set".into(),
            value: format!("{:?}", set.ranks()),
            expected: "a process set this rank belongs to".into(),
        })?;
        Self::new(len, topology.rank(), topology.size())
    }

    /// The seed every rank shares; epoch `e` shuffles with `seed + e`.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// `false` keeps the dataset's order (for evaluation).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// `true` drops the tail that does not divide evenly instead of padding.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Selects the epoch whose shuffle [`indices`](Self::indices) returns; call it at
    /// the start of every epoch, with the same value on every rank.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// How many examples each rank gets per epoch (the same on every rank).
    pub fn num_samples(&self) -> usize {
        if self.drop_last {
            self.len / self.size
        } else {
            self.len.div_ceil(self.size)
        }
    }

    /// This rank's indices for the current epoch, in the order to visit them.
    pub fn indices(&self) -> Vec<usize> {
        let order = epoch_order(self.len, self.shuffle.then_some(self.seed), self.epoch);
        let total = self.num_samples() * self.size;
        (self.rank..total)
            .step_by(self.size)
            .map(|position| order[position % self.len])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn shards(len: usize, size: usize, epoch: u64, drop_last: bool) -> Vec<Vec<usize>> {
        (0..size)
            .map(|rank| {
                let mut sampler = DistributedSampler::new(len, rank, size)
                    .unwrap()
                    .seed(42)
                    .drop_last(drop_last);
                sampler.set_epoch(epoch);
                sampler.indices()
            })
            .collect()
    }

    #[test]
    fn even_shards_are_disjoint_and_complete() {
        let shards = shards(12, 3, 0, false);
        let all: Vec<usize> = shards.iter().flatten().copied().collect();
        assert_eq!(all.len(), 12);
        assert_eq!(
            all.iter().copied().collect::<BTreeSet<_>>(),
            (0..12).collect()
        );
        assert!(shards.iter().all(|s| s.len() == 4));
    }

    #[test]
    fn uneven_shards_pad_by_wrapping_so_every_rank_gets_as_many() {
        let shards = shards(10, 4, 1, false);
        assert!(shards.iter().all(|s| s.len() == 3), "{shards:?}");
        let all: Vec<usize> = shards.iter().flatten().copied().collect();
        assert_eq!(
            all.iter().copied().collect::<BTreeSet<_>>(),
            (0..10).collect()
        );
        // 12 places for 10 examples: exactly 2 are repeated.
        assert_eq!(all.len() - 10, 2);
    }

    #[test]
    fn a_dataset_smaller_than_the_job_still_gives_every_rank_an_example() {
        let shards = shards(2, 5, 0, false);
        assert!(shards.iter().all(|s| s.len() == 1), "{shards:?}");
        assert!(shards.iter().flatten().all(|&i| i < 2));
    }

    #[test]
    fn drop_last_drops_the_tail_and_stays_disjoint() {
        let shards = shards(10, 4, 0, true);
        assert!(shards.iter().all(|s| s.len() == 2), "{shards:?}");
        let distinct: BTreeSet<usize> = shards.iter().flatten().copied().collect();
        assert_eq!(distinct.len(), 8);
    }

    #[test]
    fn each_epoch_reshuffles_and_the_same_epoch_repeats() {
        let (first, again, second) = (
            shards(100, 2, 0, false),
            shards(100, 2, 0, false),
            shards(100, 2, 1, false),
        );
        assert_eq!(first, again);
        assert_ne!(first, second);
        assert_ne!(
            first[0],
            (0..100).step_by(2).collect::<Vec<_>>(),
            "shuffled"
        );
    }

    #[test]
    fn without_shuffle_ranks_take_every_size_th_example() {
        let sampler = DistributedSampler::new(7, 1, 3).unwrap().shuffle(false);
        assert_eq!(sampler.indices(), vec![1, 4, 0]);
    }

    #[test]
    fn an_empty_dataset_gives_no_indices() {
        assert!(
            DistributedSampler::new(0, 0, 2)
                .unwrap()
                .indices()
                .is_empty()
        );
    }

    #[test]
    fn a_rank_outside_the_job_is_refused() {
        let err = DistributedSampler::new(10, 2, 2).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid value \"2\" for DistributedSampler rank: expected a rank below the job size 2"
        );
    }
}
