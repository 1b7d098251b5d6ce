//! Samples already the model's size (MNIST's grey bytes, a generator's floats), taken as
//! they are by `Augment::exact`: only normalised, channel-major, in any number of
//! threads; a sample of another size or kind is an error naming it.

use hvd_data::source::{Encoding, Sample};
use hvd_data::{Augment, ElasticSampler, InMemory, Loader, LoaderOptions, Source, Synthetic};

fn options(threads: usize) -> LoaderOptions {
    LoaderOptions {
        threads,
        prefetch: 2,
        ..Default::default()
    }
}

fn sample(label: i64, encoding: Encoding) -> Sample {
    Sample { label, encoding }
}

/// Every batch of one epoch over `source` in `augment`'s way, on one rank: the images
/// and the labels.
type Batches = Vec<(Vec<f32>, Vec<i64>, [usize; 4])>;

fn epoch(source: InMemory, augment: Augment, batch: usize, threads: usize) -> Batches {
    let sampler = ElasticSampler::new(source.len(), batch).seed(None);
    let mut loader = Loader::new(source, augment, options(threads)).unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let mut out = Vec::new();
    while let Some(b) = epoch.next_batch().unwrap() {
        out.push((b.images().to_vec(), b.labels().to_vec(), b.shape()));
    }
    out
}

/// What the first batch of a one-sample epoch fails with.
fn first_batch_error(source: InMemory, augment: Augment) -> String {
    let sampler = ElasticSampler::new(1, 1).seed(None);
    let mut loader = Loader::new(source, augment, options(1)).unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    epoch.next_batch().unwrap_err().to_string()
}

#[test]
fn grey_bytes_become_v_over_255_and_floats_stay_as_they_are() {
    let mut source = InMemory::default();
    let grey = Encoding::Grey {
        width: 2,
        height: 2,
    };
    source.push(vec![0, 51, 255, 128], sample(7, grey));
    let floats: Vec<u8> = [0.25f32, -1.5, 3.0, 0.1]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let float = Encoding::F32 {
        width: 2,
        height: 2,
        channels: 1,
    };
    source.push(floats, sample(2, float));
    let batches = epoch(source, Augment::exact(2, 1), 2, 1);
    assert_eq!(batches.len(), 1);
    let (images, labels, shape) = &batches[0];
    assert_eq!(*shape, [2, 1, 2, 2]);
    assert_eq!(labels, &[7, 2]);
    let expected = [0.0, 51.0 / 255.0, 1.0, 128.0 / 255.0, 0.25, -1.5, 3.0, 0.1];
    assert_eq!(images, &expected);
}

#[test]
fn rgb_taken_as_it_is_goes_channel_major_and_is_normalised_per_channel() {
    let mut source = InMemory::default();
    let rgb = Encoding::Rgb {
        width: 2,
        height: 1,
    };
    source.push(vec![255, 0, 51, 0, 255, 102], sample(0, rgb));
    let augment = Augment {
        mean: [0.5, 0.0, 0.0],
        std: [0.5, 1.0, 2.0],
        ..Augment::exact(1, 3)
    };
    // Not square: refused, naming the sample.
    let sampler = ElasticSampler::new(1, 1).seed(None);
    let mut loader = Loader::new(source.clone(), augment.clone(), options(1)).unwrap();
    let err = loader
        .epoch(&sampler, 0, 1)
        .unwrap()
        .next_batch()
        .unwrap_err()
        .to_string();
    assert!(err.contains("in-memory sample 0"), "{err}");
    assert!(err.contains("RGB image of 2 x 1"), "{err}");
    assert!(err.contains("resize the samples first"), "{err}");

    let mut square = InMemory::default();
    let rgb = Encoding::Rgb {
        width: 2,
        height: 2,
    };
    square.push([255, 0, 51, 0, 255, 102].repeat(2), sample(1, rgb));
    let batches = epoch(square, Augment { size: 2, ..augment }, 1, 1);
    let (images, _, shape) = &batches[0];
    assert_eq!(*shape, [1, 3, 2, 2]);
    assert_eq!(&images[..4], &[1.0, -1.0, 1.0, -1.0]);
    assert_eq!(&images[4..8], &[0.0, 1.0, 0.0, 1.0]);
    assert!((images[8] - 0.1).abs() < 1e-6 && (images[9] - 0.2).abs() < 1e-6);
}

#[test]
fn many_threads_give_the_batches_of_one() {
    let mut source = InMemory::default();
    for i in 0..50u8 {
        let pixels = (0..9).map(|p| i.wrapping_mul(5).wrapping_add(p)).collect();
        let grey = Encoding::Grey {
            width: 3,
            height: 3,
        };
        source.push(pixels, sample(i64::from(i % 10), grey));
    }
    let one = epoch(source.clone(), Augment::exact(3, 1), 8, 1);
    assert_eq!(one.len(), 7);
    assert_eq!(one[6].2, [2, 1, 3, 3], "the last step holds what is left");
    assert_eq!(epoch(source, Augment::exact(3, 1), 8, 3), one);
}

#[test]
fn floats_cannot_be_resized_and_grey_output_needs_samples_taken_as_they_are() {
    let mut source = InMemory::default();
    let float = Encoding::F32 {
        width: 4,
        height: 4,
        channels: 3,
    };
    source.push(vec![0; 4 * 4 * 3 * 4], sample(0, float));
    let err = first_batch_error(source, Augment::eval(2));
    assert!(
        err.contains("3-channel f32 image of 4 x 4 cannot be cropped"),
        "{err}"
    );

    let refused = |augment| {
        Loader::new(Synthetic::new(1, 4, 4, 1), augment, options(1))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused(Augment {
            channels: 1,
            ..Augment::train(4)
        }),
        "invalid Augment::channels: 1 with resize: grey output is for samples taken as \
         they are (Augment::exact)"
    );
    assert_eq!(
        refused(Augment::exact(4, 2)),
        "invalid Augment::channels: 2: expected 1 (grey) or 3 (RGB)"
    );
}

#[test]
fn bytes_that_are_not_the_pixels_they_claim_are_an_error_naming_the_sample() {
    let mut source = InMemory::default();
    let grey = Encoding::Grey {
        width: 28,
        height: 28,
    };
    source.push(vec![0; 783], sample(0, grey));
    let err = first_batch_error(source, Augment::exact(28, 1));
    assert!(
        err.contains("in-memory sample 0") && err.contains("783 bytes are not 28 x 28 grey pixels"),
        "{err}"
    );
}
