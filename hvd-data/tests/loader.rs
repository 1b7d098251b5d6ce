//! The loader hands over every step in order, the same whatever the threads, reuses its
//! buffers, and stops cleanly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hvd_data::source::Sample;
use hvd_data::{
    Augment, DecodePriority, ElasticSampler, Error, Loader, LoaderOptions, Source, Synthetic,
};

fn options(threads: usize, prefetch: usize) -> LoaderOptions {
    LoaderOptions {
        threads,
        prefetch,
        seed: 5,
        ..Default::default()
    }
}

/// Every batch of one epoch of rank `rank` of `size`: (indices, labels, images).
fn run_epoch(
    loader: &mut Loader,
    sampler: &ElasticSampler,
    rank: usize,
    size: usize,
) -> Vec<(Vec<usize>, Vec<i64>, Vec<f32>)> {
    let mut epoch = loader.epoch(sampler, rank, size).unwrap();
    let mut batches = Vec::new();
    while let Some(batch) = epoch.next_batch().unwrap() {
        batches.push((
            batch.indices().to_vec(),
            batch.labels().to_vec(),
            batch.images().to_vec(),
        ));
    }
    batches
}

#[test]
fn batches_come_in_step_order_with_the_samplers_shares_and_the_last_is_short() {
    let source = Synthetic::new(50, 20, 16, 7);
    let mut sampler = ElasticSampler::new(50, 12).seed(Some(3));
    sampler.set_epoch(2);
    let mut loader = Loader::new(source, Augment::train(6), options(3, 2)).unwrap();
    let batches = run_epoch(&mut loader, &sampler, 1, 3);
    assert_eq!(batches.len(), 5);
    for (step, (indices, labels, images)) in batches.iter().enumerate() {
        assert_eq!(
            indices.as_slice(),
            sampler.batch_ahead(step, 1, 3),
            "step {step}"
        );
        assert_eq!(
            labels,
            &indices.iter().map(|&i| i as i64 % 7).collect::<Vec<_>>()
        );
        assert_eq!(images.len(), indices.len() * 3 * 36);
    }
    // 50 = 4 × 12 + 2: the last step gives rank 1 of 3 one sample.
    assert_eq!(batches[4].0.len(), 1);
}

#[test]
fn the_same_seed_gives_the_same_batches_whatever_the_threads_and_prefetch() {
    let sampler = ElasticSampler::new(40, 8).seed(Some(1));
    let mut one = Loader::new(
        Synthetic::new(40, 30, 22, 4),
        Augment::train(10),
        options(1, 1),
    )
    .unwrap();
    let mut four = Loader::new(
        Synthetic::new(40, 30, 22, 4),
        Augment::train(10),
        options(4, 3),
    )
    .unwrap();
    let first = run_epoch(&mut one, &sampler, 0, 2);
    assert_eq!(first, run_epoch(&mut four, &sampler, 0, 2));
    // And a second epoch from the same loader repeats it too.
    assert_eq!(first, run_epoch(&mut four, &sampler, 0, 2));
    let other_seed = LoaderOptions {
        seed: 6,
        ..options(2, 2)
    };
    let mut other = Loader::new(
        Synthetic::new(40, 30, 22, 4),
        Augment::train(10),
        other_seed,
    )
    .unwrap();
    let moved = run_epoch(&mut other, &sampler, 0, 2);
    assert_eq!(
        moved.iter().map(|b| &b.0).collect::<Vec<_>>(),
        first.iter().map(|b| &b.0).collect::<Vec<_>>()
    );
    assert_ne!(moved, first, "another augmentation seed crops differently");
}

#[test]
fn buffers_are_reused_from_step_to_step_and_epoch_to_epoch_on_64_byte_boundaries() {
    let (threads, prefetch) = (2, 2);
    let mut sampler = ElasticSampler::new(400, 4).seed(Some(9));
    let mut loader = Loader::new(
        Synthetic::new(400, 8, 8, 3),
        Augment::train(4),
        options(threads, prefetch),
    )
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for epoch_number in 0..2 {
        sampler.set_epoch(epoch_number);
        let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
        while let Some(batch) = epoch.next_batch().unwrap() {
            let (images, labels) = (batch.images().as_ptr(), batch.labels().as_ptr());
            // TensorFlow takes a batch as tensors without a copy only at this alignment.
            assert_eq!((images as usize % 64, labels as usize % 64), (0, 0));
            seen.insert(images as usize);
        }
    }
    // 200 batches from the same few buffers.
    assert!(
        seen.len() <= threads + prefetch,
        "{} distinct buffers",
        seen.len()
    );
}

/// A source whose reads wait until released, to hold the decode threads mid-sample.
#[derive(Debug)]
struct Gate {
    inner: Synthetic,
    open: Arc<AtomicBool>,
    delay: Duration,
}

impl Source for Gate {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn read(&self, index: usize, bytes: &mut Vec<u8>) -> hvd_data::Result<Sample> {
        if !self.open.load(Ordering::SeqCst) {
            std::thread::sleep(self.delay);
        }
        self.inner.read(index, bytes)
    }

    fn name(&self, index: usize) -> String {
        self.inner.name(index)
    }
}

#[test]
fn dropping_an_epoch_midway_stops_its_threads_promptly() {
    let source = Gate {
        inner: Synthetic::new(10_000, 8, 8, 2),
        open: Arc::new(AtomicBool::new(false)),
        delay: Duration::from_millis(20),
    };
    let sampler = ElasticSampler::new(10_000, 64);
    let mut loader = Loader::new(source, Augment::train(4), options(3, 4)).unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    assert_eq!(epoch.next_batch().unwrap().unwrap().len(), 64);
    let started = Instant::now();
    drop(epoch);
    // Each thread finishes the sample it is on (20 ms), not its batch (64 × 20 ms).
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "took {:?}",
        started.elapsed()
    );
    // The loader is whole again: another epoch runs.
    assert_eq!(loader.epoch(&sampler, 0, 1).unwrap().steps(), 157);
}

#[test]
fn a_thread_stuck_in_a_read_does_not_hold_up_the_end_of_its_epoch() {
    let source = Gate {
        inner: Synthetic::new(8, 8, 8, 2),
        open: Arc::new(AtomicBool::new(false)),
        delay: Duration::from_secs(5),
    };
    let sampler = ElasticSampler::new(8, 4);
    let timeout = Duration::from_millis(200);
    let options = LoaderOptions {
        timeout,
        ..options(1, 1)
    };
    let mut loader = Loader::new(source, Augment::train(4), options).unwrap();
    let epoch = loader.epoch(&sampler, 0, 1).unwrap();
    // Let the thread start its first read.
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    drop(epoch);
    let took = started.elapsed();
    assert!(
        took >= timeout && took < Duration::from_secs(3),
        "took {took:?}"
    );
    // The loader goes on, with a new buffer for the one the stuck thread holds.
    assert_eq!(loader.epoch(&sampler, 0, 1).unwrap().steps(), 2);
}

#[test]
fn a_batch_that_takes_too_long_is_a_timeout_naming_the_step() {
    let source = Gate {
        inner: Synthetic::new(8, 8, 8, 2),
        open: Arc::new(AtomicBool::new(false)),
        delay: Duration::from_millis(400),
    };
    let open = Arc::clone(&source.open);
    let sampler = ElasticSampler::new(8, 4);
    let timeout = Duration::from_millis(100);
    let mut loader = Loader::new(
        source,
        Augment::train(4),
        LoaderOptions {
            timeout,
            ..options(1, 1)
        },
    )
    .unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let err = epoch.next_batch().unwrap_err();
    assert!(matches!(err, Error::Timeout { step: 0, .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("rank 0: no batch for step 0 within 0.1 s"),
        "{err}"
    );
    open.store(true, Ordering::SeqCst);
    let started = Instant::now();
    drop(epoch);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn settings_out_of_range_are_refused_by_name() {
    let err = |options, augment| {
        Loader::new(Synthetic::new(4, 8, 8, 2), augment, options)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(options(0, 1), Augment::train(4)),
        "invalid LoaderOptions::threads: 0: at least one decode thread is needed"
    );
    assert_eq!(
        err(options(1, 0), Augment::train(4)),
        "invalid LoaderOptions::prefetch: 0: at least one batch must be prepared ahead"
    );
    assert_eq!(
        err(options(1, 1), Augment::train(0)),
        "invalid Augment::size: 0: images need at least one pixel, and at most 16384 a side"
    );
    assert_eq!(
        err(options(1, 1), Augment::train(1 << 20)),
        "invalid Augment::size: 1048576: images need at least one pixel, and at most 16384 a side"
    );
    assert_eq!(
        err(options(1025, 1), Augment::train(4)),
        "invalid LoaderOptions::threads: 1025: at most 1024"
    );
    assert_eq!(
        err(options(1, 1 << 40), Augment::train(4)),
        "invalid LoaderOptions::prefetch: 1099511627776: at most 1024"
    );
    for (timeout, shown) in [
        (std::time::Duration::ZERO, "0ns"),
        (std::time::Duration::from_secs(1 << 40), "1099511627776s"),
    ] {
        let options = LoaderOptions {
            timeout,
            ..options(1, 1)
        };
        assert_eq!(
            err(options, Augment::train(4)),
            format!(
                "invalid LoaderOptions::timeout: {shown}: more than nothing, at most ten years"
            )
        );
    }
    let nice = LoaderOptions {
        priority: DecodePriority::Nice(20),
        ..options(1, 1)
    };
    assert_eq!(
        err(nice, Augment::train(4)),
        "invalid LoaderOptions::priority: nice 20: Linux's nice steps go from 0 (the training \
         loop's own priority) to 19"
    );
    let scale = Augment {
        scale: (0.5, 0.2),
        ..Augment::train(4)
    };
    assert_eq!(
        err(options(1, 1), scale),
        "invalid Augment::scale: (0.5, 0.2): expected 0 < low <= high <= 1"
    );
    let ratio = Augment {
        ratio: (0.0, 1.0),
        ..Augment::train(4)
    };
    assert_eq!(
        err(options(1, 1), ratio),
        "invalid Augment::ratio: (0.0, 1.0): expected 0 < low <= high"
    );
    let std = Augment {
        std: [0.2, 0.0, 0.2],
        ..Augment::train(4)
    };
    assert_eq!(
        err(options(1, 1), std),
        "invalid Augment::std: 0: a channel's std must be finite and not 0"
    );
    let mut loader =
        Loader::new(Synthetic::new(4, 8, 8, 2), Augment::train(4), options(1, 1)).unwrap();
    let wrong = loader
        .epoch(&ElasticSampler::new(5, 2), 0, 1)
        .unwrap_err()
        .to_string();
    assert_eq!(
        wrong,
        "invalid sampler: it walks 5 samples but the source has 4"
    );
    let outside = loader
        .epoch(&ElasticSampler::new(4, 2), 2, 2)
        .unwrap_err()
        .to_string();
    assert_eq!(outside, "invalid rank: 2 is not below the job size 2");
}

#[test]
fn batches_are_owned_they_go_to_other_threads_and_may_outlive_their_epoch() {
    let mut loader =
        Loader::new(Synthetic::new(12, 8, 8, 3), Augment::eval(4), options(1, 1)).unwrap();
    let sampler = ElasticSampler::new(12, 4).seed(None);
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let first = epoch.next_batch().unwrap().unwrap();
    // Two batches held at once, one of them read on another thread.
    let second = epoch.next_batch().unwrap().unwrap();
    let indices = std::thread::spawn(move || second.indices().to_vec())
        .join()
        .unwrap();
    assert_eq!(
        (first.indices(), indices.as_slice()),
        (&[0, 1, 2, 3][..], &[4, 5, 6, 7][..])
    );
    drop(epoch);
    assert_eq!(first.len(), 4, "the batch outlives its epoch");
    drop(first);
    // The batch that outlived its epoch went home to the loader with the others.
    let mut again = loader.epoch(&sampler, 0, 1).unwrap();
    assert_eq!(again.next_batch().unwrap().unwrap().indices(), [0, 1, 2, 3]);
}

#[test]
fn a_loop_that_holds_every_buffer_gets_a_timeout_that_says_so() {
    let options = LoaderOptions {
        timeout: Duration::from_millis(300),
        ..options(1, 1)
    };
    let mut loader = Loader::new(Synthetic::new(16, 8, 8, 3), Augment::eval(4), options).unwrap();
    let sampler = ElasticSampler::new(16, 4);
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    // One thread and one batch ahead: two buffers, both held here.
    let held = [epoch.next_batch().unwrap(), epoch.next_batch().unwrap()];
    let err = epoch.next_batch().unwrap_err();
    assert!(matches!(err, Error::Timeout { step: 2, .. }), "{err}");
    assert!(
        err.to_string().contains("holds every batch buffer"),
        "{err}"
    );
    drop(held);
}
