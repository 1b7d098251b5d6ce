//! The loader measures its own decode rate and, with a step clock's times, chooses the
//! next epochs' threads and prefetch within the rank's share of the host.

use hvd_data::{Augment, ElasticSampler, Loader, LoaderOptions, StepTimes, Synthetic, TuneLimits};

/// Runs one epoch of 6 batches of 4; every batch is checked.
fn run_epoch(loader: &mut Loader) {
    let sampler = ElasticSampler::new(24, 4);
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let mut batches = 0;
    while let Some(batch) = epoch.next_batch().unwrap() {
        assert_eq!(batch.len(), 4);
        batches += 1;
    }
    assert_eq!(batches, 6);
}

/// Steps of `fed` seconds when their batch is ready (plus a wait for data, which the
/// tuning leaves out).
fn steps(fed: f64) -> Vec<StepTimes> {
    vec![
        StepTimes {
            data: 0.5,
            comm: 0.0,
            wall: fed + 0.5,
        };
        6
    ]
}

#[test]
fn an_epoch_measured_sets_the_next_epochs_threads_within_the_ranks_share() {
    let options = LoaderOptions {
        threads: 1,
        prefetch: 1,
        ..Default::default()
    };
    let mut loader =
        Loader::new(Synthetic::new(24, 64, 48, 3), Augment::train(32), options).unwrap();
    // Six cores, two ranks on the host: three threads at most for this one.
    let limits = TuneLimits::even(6, 2);
    assert_eq!(
        loader.autotune(&steps(0.1), limits),
        None,
        "nothing decoded yet"
    );

    run_epoch(&mut loader);
    // A step of a microsecond: no share of a host keeps up with that.
    let fast = loader.autotune(&steps(1e-6), limits).unwrap();
    assert_eq!(fast.threads, 3);
    assert!(fast.threads_needed > 3 && !fast.keeps_up(), "{fast:?}");
    assert!(fast.expected_data_bound() > 0.5, "{fast:?}");
    assert_eq!(
        (loader.options().threads, loader.options().prefetch),
        (fast.threads, fast.prefetch)
    );

    run_epoch(&mut loader); // with the three threads chosen
    // A step of 100 s: one thread is plenty, two batches ahead.
    let slow = loader.autotune(&steps(100.0), limits).unwrap();
    assert_eq!(
        (slow.threads, slow.prefetch, slow.threads_needed),
        (1, 2, 1)
    );
    assert!(slow.keeps_up() && slow.capacity > slow.demand, "{slow:?}");
    assert_eq!(
        loader.take_decode_rate().images,
        0,
        "each tuning takes its epoch's rate"
    );
}

#[test]
fn the_decode_rate_counts_every_image_and_batch_made() {
    let mut loader = Loader::new(
        Synthetic::new(24, 64, 48, 3),
        Augment::eval(32),
        LoaderOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    run_epoch(&mut loader);
    let rate = loader.take_decode_rate();
    assert_eq!((rate.images, rate.batches), (24, 6));
    assert_eq!(rate.batch_images(), Some(4.0));
    assert!(rate.seconds_per_image().unwrap() > 0.0);
    assert_eq!(loader.take_decode_rate().seconds_per_image(), None);
}
