//! Exactly once, elastic-safe: whatever ranks are lost or added mid-epoch, every sample is
//! trained on once per epoch, none padded in or repeated.

use hvd_core::rng::SplitMix64;
use hvd_data::{Augment, ElasticSampler, Loader, LoaderOptions, Synthetic};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    /// A rank dies: the job rolls back to its last commit and goes on with one fewer.
    Lose,
    /// A host joins: the job commits and goes on with one more.
    Add,
}

/// One random job of two epochs that starts with 4 ranks, loses one at a random step,
/// loses another later (4 → 3 → 2), and gains one back, committing at random steps.
/// Returns what each epoch trained on (rolled-back steps undone) and the sizes it ran at.
fn run_schedule(schedule: u64) -> (usize, Vec<Vec<usize>>, Vec<usize>) {
    let mut rng = SplitMix64::new(schedule);
    let len = 90 + rng.below(70) as usize;
    let global_batch = 6 + rng.below(11) as usize;
    let steps = 2 * len.div_ceil(global_batch);
    let mut events: Vec<(usize, Event)> = Vec::new();
    // All three within the job's steps, however few.
    let quarter = steps as u64 / 4;
    let first = 1 + rng.below(quarter) as usize;
    let second = first + 1 + rng.below(quarter) as usize;
    let third = second + 1 + rng.below(quarter) as usize;
    events.extend([
        (first, Event::Lose),
        (second, Event::Lose),
        (third, Event::Add),
    ]);

    let options = LoaderOptions {
        threads: 2,
        prefetch: 2,
        seed: schedule,
        ..Default::default()
    };
    let mut loaders: Vec<Loader> = (0..4)
        .map(|_| {
            Loader::new(
                Synthetic::new(len, 6, 5, 3),
                Augment::train(2),
                options.clone(),
            )
            .unwrap()
        })
        .collect();
    let mut sampler = ElasticSampler::new(len, global_batch).seed(Some(schedule));
    let (mut size, mut executed, mut sizes) = (4, 0, vec![4]);
    let mut epochs_seen = Vec::new();
    for epoch in 0..2 {
        sampler.set_epoch(epoch);
        let (mut seen, mut committed, mut committed_seen) = (Vec::new(), sampler.to_words(), 0);
        while !sampler.epoch_done() {
            // A round: every rank's loader from the sampler's (restored) place.
            let mut rounds: Vec<_> = loaders[..size]
                .iter_mut()
                .enumerate()
                .map(|(rank, loader)| loader.epoch(&sampler, rank, size).unwrap())
                .collect();
            let mut event = None;
            while event.is_none() && !sampler.epoch_done() {
                for (rank, round) in rounds.iter_mut().enumerate() {
                    let batch = round.next_batch().unwrap().expect("a batch for every step");
                    assert_eq!(batch.indices(), sampler.next_batch(rank, size));
                    seen.extend_from_slice(batch.indices());
                }
                sampler.advance();
                executed += 1;
                if rng.below(3) == 0 {
                    committed = sampler.to_words();
                    committed_seen = seen.len();
                }
                event = events
                    .iter()
                    .find(|(at, _)| *at == executed)
                    .map(|(_, e)| *e);
            }
            drop(rounds);
            match event {
                Some(Event::Lose) => {
                    sampler.set_words(committed);
                    seen.truncate(committed_seen);
                    size -= 1;
                }
                Some(Event::Add) => {
                    committed = sampler.to_words();
                    committed_seen = seen.len();
                    size += 1;
                }
                None => continue,
            }
            sizes.push(size);
        }
        epochs_seen.push(seen);
    }
    (len, epochs_seen, sizes)
}

#[test]
fn ten_random_elastic_schedules_see_every_sample_exactly_once_per_epoch() {
    let mut all_sizes = std::collections::BTreeSet::new();
    for schedule in 0..10 {
        let (len, epochs, sizes) = run_schedule(schedule);
        assert_eq!(
            sizes,
            [4, 3, 2, 3],
            "schedule {schedule} ran all its events"
        );
        for (epoch, mut seen) in epochs.into_iter().enumerate() {
            assert_eq!(
                seen.len(),
                len,
                "schedule {schedule} epoch {epoch}: nothing padded or repeated"
            );
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..len).collect::<Vec<_>>(),
                "schedule {schedule} epoch {epoch}"
            );
        }
        all_sizes.extend(sizes);
    }
    assert_eq!(all_sizes.into_iter().collect::<Vec<_>>(), [2, 3, 4]);
}
