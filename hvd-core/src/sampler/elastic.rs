//! [`ElasticSampler`]: every example once per epoch, whatever happens to the job's size.

use std::ops::Range;

use super::epoch_order;

/// Where a job keeps the counters that its commits save and its rollbacks restore (the
/// facade's `hvd::elastic::TensorState`).
pub trait CounterStore {
    /// Sets `name` to `values`.
    fn set_u64s(&mut self, name: &str, values: &[u64]);
    /// The counters of `name`, if set.
    fn get_u64s(&self, name: &str) -> Option<Vec<u64>>;
}

/// Which examples each rank trains on in an elastic job, where the number of ranks
/// changes between rounds.
///
/// The job walks one permutation of `0..len` per epoch (from `seed + epoch`, the same
/// on every rank) in global batches of a fixed size, however many ranks there are: a
/// step takes the next `global_batch` positions and splits them between the ranks of
/// the round, as evenly as they go. The sampler's place ([`consumed`](Self::consumed)) is
/// part of the job's committed state, so after a failure the job goes back to exactly
/// the positions it had committed, and after a resize it goes on from there: every
/// example is seen once per epoch, none is padded in or skipped. The last batch of an
/// epoch holds what is left; a rank whose share is empty should join (`hvd`'s
/// `ProcessSet::join`) rather than skip the step's collectives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElasticSampler {
    len: usize,
    global_batch: usize,
    seed: Option<u64>,
    epoch: u64,
    consumed: usize,
    order: Vec<usize>,
}

impl ElasticSampler {
    /// A sampler of `len` examples in global batches of `global_batch` (at least 1),
    /// shuffled with seed 0, at the start of epoch 0.
    pub fn new(len: usize, global_batch: usize) -> Self {
        let mut sampler = ElasticSampler {
            len,
            global_batch: global_batch.max(1),
            seed: Some(0),
            epoch: 0,
            consumed: 0,
            order: Vec::new(),
        };
        sampler.reorder();
        sampler
    }

    /// The seed every rank shares; `None` keeps the dataset's order.
    pub fn seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self.reorder();
        self
    }

    fn reorder(&mut self) {
        self.order = epoch_order(self.len, self.seed, self.epoch);
    }

    /// Starts epoch `epoch` from its first example.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.consumed = 0;
        self.reorder();
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many examples of this epoch the job has stepped past.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Whether the epoch's examples are all consumed.
    pub fn epoch_done(&self) -> bool {
        self.consumed >= self.len
    }

    /// The seed of the epoch's shuffle (`None`: the dataset's order).
    pub fn shuffle_seed(&self) -> Option<u64> {
        self.seed
    }

    /// How many examples the sampler walks per epoch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the dataset is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many examples a step takes, across all ranks.
    pub fn global_batch(&self) -> usize {
        self.global_batch
    }

    /// The positions of the permutation the next step takes.
    fn next_positions(&self) -> Range<usize> {
        let end = self.len.min(self.consumed + self.global_batch);
        self.consumed.min(end)..end
    }

    /// Every example of the next step, in rank order of the shares.
    pub fn next_global_batch(&self) -> &[usize] {
        self.global_batch_ahead(0)
    }

    /// Rank `rank` of `size`'s share of the next step: a contiguous part of the global
    /// batch, the first ranks taking one more when it does not divide evenly; empty for
    /// some ranks in the epoch's last, short batch.
    pub fn next_batch(&self, rank: usize, size: usize) -> &[usize] {
        self.batch_ahead(0, rank, size)
    }

    /// How many steps are left in the epoch, the next one included.
    pub fn steps_left(&self) -> usize {
        (self.len - self.consumed.min(self.len)).div_ceil(self.global_batch)
    }

    /// The global batch `ahead` steps after the next one (empty past the epoch's end), for
    /// a loader that prepares steps before the job reaches them.
    pub fn global_batch_ahead(&self, ahead: usize) -> &[usize] {
        let start = ahead
            .checked_mul(self.global_batch)
            .and_then(|skip| skip.checked_add(self.consumed))
            .map_or(self.len, |start| start.min(self.len));
        &self.order[start..self.len.min(start.saturating_add(self.global_batch))]
    }

    /// Rank `rank` of `size`'s share of the step `ahead` steps after the next one, cut
    /// like [`next_batch`](Self::next_batch).
    pub fn batch_ahead(&self, ahead: usize, rank: usize, size: usize) -> &[usize] {
        let batch = self.global_batch_ahead(ahead);
        let (base, extra) = (batch.len() / size.max(1), batch.len() % size.max(1));
        let start = rank * base + rank.min(extra);
        let len = base + usize::from(rank < extra);
        &batch[start.min(batch.len())..(start + len).min(batch.len())]
    }

    /// Moves past the step just taken.
    pub fn advance(&mut self) {
        self.consumed = self.next_positions().end;
    }

    /// Keeps the sampler's place in `state` under `name`.
    pub fn save_to(&self, state: &mut (impl CounterStore + ?Sized), name: &str) {
        state.set_u64s(name, &self.to_words());
    }

    /// Goes to the place kept in `state` under `name`; stays where it is if there is
    /// none (a job's first round).
    pub fn load_from(&mut self, state: &(impl CounterStore + ?Sized), name: &str) {
        if let Some([epoch, consumed]) = state.get_u64s(name).as_deref() {
            self.set_words([*epoch, *consumed]);
        }
    }

    /// The sampler's place, for the job's state: `[epoch, consumed]`.
    pub fn to_words(&self) -> [u64; 2] {
        [self.epoch, self.consumed as u64]
    }

    /// Goes back (or forward) to a place [`to_words`](Self::to_words) gave.
    pub fn set_words(&mut self, [epoch, consumed]: [u64; 2]) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.reorder();
        }
        self.consumed = usize::try_from(consumed).map_or(self.len, |c| c.min(self.len));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn shares_split_the_global_batch_and_the_last_batch_holds_the_rest() {
        let mut sampler = ElasticSampler::new(10, 4).seed(None);
        assert_eq!(sampler.next_batch(0, 3), &[0, 1]);
        assert_eq!(sampler.next_batch(1, 3), &[2]);
        assert_eq!(sampler.next_batch(2, 3), &[3]);
        sampler.advance();
        sampler.advance();
        assert_eq!(sampler.next_global_batch(), &[8, 9]);
        assert_eq!(sampler.next_batch(2, 3), &[] as &[usize]);
        sampler.advance();
        assert!(sampler.epoch_done());
    }

    #[test]
    fn every_example_is_seen_once_per_epoch_through_resizes_and_rollbacks() {
        let mut sampler = ElasticSampler::new(103, 8).seed(Some(7));
        let mut seen = Vec::new();
        let mut committed = sampler.to_words();
        let mut committed_seen = 0;
        let sizes = [8, 6, 6, 3, 8, 1, 5];
        let mut step = 0;
        while !sampler.epoch_done() {
            let size = sizes[step % sizes.len()];
            for rank in 0..size {
                seen.extend_from_slice(sampler.next_batch(rank, size));
            }
            sampler.advance();
            step += 1;
            if step % 3 == 0 {
                committed = sampler.to_words();
                committed_seen = seen.len();
            } else if step % 5 == 0 {
                // A failure: back to the last commit, forgetting what was done since.
                sampler.set_words(committed);
                seen.truncate(committed_seen);
            }
        }
        assert_eq!(seen.len(), 103);
        assert_eq!(seen.iter().copied().collect::<BTreeSet<_>>().len(), 103);
    }

    #[test]
    fn steps_ahead_are_the_steps_the_sampler_reaches_by_advancing() {
        let sampler = ElasticSampler::new(23, 5).seed(Some(4));
        assert_eq!(sampler.steps_left(), 5);
        let mut walker = sampler.clone();
        for ahead in 0..5 {
            assert_eq!(
                sampler.global_batch_ahead(ahead),
                walker.next_global_batch()
            );
            for rank in 0..3 {
                assert_eq!(
                    sampler.batch_ahead(ahead, rank, 3),
                    walker.next_batch(rank, 3)
                );
            }
            walker.advance();
            assert_eq!(walker.steps_left(), 4 - ahead);
        }
        assert!(sampler.global_batch_ahead(5).is_empty());
        assert!(sampler.global_batch_ahead(usize::MAX).is_empty());
    }

    #[test]
    fn epochs_shuffle_differently_and_alike_on_every_rank() {
        let mut a = ElasticSampler::new(50, 5).seed(Some(3));
        let b = a.clone();
        assert_eq!(a.next_global_batch(), b.next_global_batch());
        a.set_epoch(1);
        assert_ne!(a.next_global_batch(), b.next_global_batch());
        assert_eq!(a.consumed(), 0);
    }
}
