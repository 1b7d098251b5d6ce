//! Every rank's loader tuned at once: the ranks of a host split its cores by what each
//! measured it needs, and ranks on other hosts do not count.
#![cfg(feature = "data")]

mod common;

use common::{config, job_on_hosts};
use hvd::Hvd;
use hvd::data::{Augment, ElasticSampler, Loader, LoaderOptions, StepTimes, Synthetic};

/// The host's cores the test pretends to have.
const CORES: usize = 8;

/// Steps of `fed` seconds when their batch was ready.
fn steps(fed: f64, n: usize) -> Vec<StepTimes> {
    vec![
        StepTimes {
            data: 0.0,
            comm: 0.0,
            wall: fed,
        };
        n
    ]
}

/// A loader of `samples` synthetic images with `threads` decode threads.
fn loader(samples: usize, threads: usize) -> Loader {
    let options = LoaderOptions {
        threads,
        prefetch: 1,
        ..Default::default()
    };
    Loader::new(
        Synthetic::new(samples, 64, 48, 3),
        Augment::train(32),
        options,
    )
    .unwrap()
}

/// This rank's share of one epoch of `loader`, 4 images a rank a step: its steps.
fn run_epoch(hvd: &Hvd, loader: &mut Loader) -> usize {
    let sampler = ElasticSampler::new(loader.source().len(), 4 * hvd.size());
    let mut epoch = loader.epoch(&sampler, hvd.rank(), hvd.size()).unwrap();
    let mut batches = 0;
    while epoch.next_batch().unwrap().is_some() {
        batches += 1;
    }
    batches
}

#[test]
fn a_hosts_cores_go_to_its_ranks_by_need_and_other_hosts_do_not_count() {
    // Ranks 0 and 1 on host 0, 2 and 3 on host 1. Rank 1's step takes a microsecond (no
    // number of threads keeps up with it); the others' take 100 s (one thread is plenty).
    let tunings = job_on_hosts(vec![0, 0, 1, 1], config(), |hvd| {
        let mut loader = loader(32, 1);
        let batches = run_epoch(&hvd, &mut loader);
        let fed = if hvd.rank() == 1 { 1e-6 } else { 100.0 };
        let tuning = hvd::data_tune::autotune(&hvd, &mut loader, &steps(fed, batches), CORES)
            .unwrap()
            .expect("an epoch was measured");
        assert_eq!(loader.options().threads, tuning.threads);
        tuning
    });
    let got: Vec<(usize, usize)> = tunings.iter().map(|t| (t.share, t.threads)).collect();
    // Host 0: rank 0 needs one thread, rank 1 more than the 7 cores left, which it gets
    // (an even split would give it 4). Host 1: both fit, and share the spare cores.
    assert_eq!(got, vec![(1, 1), (7, 7), (4, 1), (4, 1)], "{tunings:?}");
    assert!(tunings[1].threads_needed > 7 && !tunings[1].keeps_up());
}

#[test]
fn a_rank_that_measured_nothing_keeps_its_settings_and_they_count() {
    let tunings = job_on_hosts(vec![0, 0], config(), |hvd| {
        let mut loader = loader(8, 3);
        if hvd.rank() == 0 {
            run_epoch(&hvd, &mut loader);
        }
        let tuning = hvd::data_tune::autotune(&hvd, &mut loader, &steps(1e-6, 1), CORES).unwrap();
        (tuning, loader.options().threads)
    });
    // Rank 1 decoded nothing: no tuning, and its 3 threads kept and set aside, so rank
    // 0 (which needs more than the host has) gets the other 5.
    assert_eq!(tunings[1], (None, 3));
    let rank0 = tunings[0].0.expect("rank 0 measured an epoch");
    assert!(rank0.threads_needed > CORES, "{rank0:?}");
    assert_eq!((rank0.share, rank0.threads), (5, 5), "{rank0:?}");
}

#[test]
fn ranks_that_may_use_different_cores_split_the_fewest() {
    // Two ranks on a host that both need more than it has; rank 1 may run on 6 cores
    // only (its CPU affinity or quota), so the two split 6, not 8.
    let tunings = job_on_hosts(vec![0, 0], config(), |hvd| {
        let mut loader = loader(8, 1);
        run_epoch(&hvd, &mut loader);
        let cores = if hvd.rank() == 1 { 6 } else { CORES };
        hvd::data_tune::autotune(&hvd, &mut loader, &steps(1e-6, 1), cores)
            .unwrap()
            .expect("an epoch was measured")
    });
    for (rank, tuning) in tunings.iter().enumerate() {
        assert!(tuning.threads_needed > CORES, "rank {rank}: {tuning:?}");
        assert!(tuning.share >= 1, "rank {rank}: {tuning:?}");
    }
    // Each rank's need is its own measured decode rate, so the 6 cores split in
    // proportion to two needs that differ from run to run: their sum is what is fixed.
    let total: usize = tunings.iter().map(|t| t.share).sum();
    assert_eq!(total, 6, "{tunings:?}");
}
