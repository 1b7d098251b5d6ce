//! Every rank's loader tuned at once: the ranks of a host split its cores by what each
//! measured it needs, and ranks on other hosts do not count.
#![cfg(feature = "data")]

mod common;

use common::{config, job_on_hosts};
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

#[test]
fn a_hosts_cores_go_to_its_ranks_by_need_and_other_hosts_do_not_count() {
    // Ranks 0 and 1 on host 0, 2 and 3 on host 1. Rank 1's step takes a microsecond (no
    // number of threads keeps up with it); the others' take 100 s (one thread is plenty).
    let tunings = job_on_hosts(vec![0, 0, 1, 1], config(), |hvd| {
        let options = LoaderOptions {
            threads: 1,
            prefetch: 1,
            ..Default::default()
        };
        let mut loader =
            Loader::new(Synthetic::new(32, 64, 48, 3), Augment::train(32), options).unwrap();
        let sampler = ElasticSampler::new(32, 4 * hvd.size());
        let mut epoch = loader.epoch(&sampler, hvd.rank(), hvd.size()).unwrap();
        let mut batches = 0;
        while epoch.next_batch().unwrap().is_some() {
            batches += 1;
        }
        drop(epoch);
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
        let mut loader = Loader::new(
            Synthetic::new(8, 64, 48, 3),
            Augment::train(32),
            LoaderOptions {
                threads: 3,
                ..Default::default()
            },
        )
        .unwrap();
        if hvd.rank() == 0 {
            let sampler = ElasticSampler::new(8, 4);
            let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
            while epoch.next_batch().unwrap().is_some() {}
        }
        let tuning = hvd::data_tune::autotune(&hvd, &mut loader, &steps(1e-6, 2), CORES).unwrap();
        (tuning, loader.options().threads)
    });
    // Rank 1 decoded nothing: no tuning, and its 3 threads kept and set aside, so rank
    // 0 (which needs more than the host has) gets the other 5.
    assert_eq!(tunings[1], (None, 3));
    let rank0 = tunings[0].0.expect("rank 0 measured an epoch");
    assert!(rank0.threads_needed > CORES, "{rank0:?}");
    assert_eq!((rank0.share, rank0.threads), (5, 5), "{rank0:?}");
}
