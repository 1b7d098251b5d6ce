//! The train_mnist example across real processes over TCP: 2 ranks with the same global
//! batch learn what 1 rank learns, and rank 0 saves a checkpoint that loads back.
//!
//! The example's code is compiled into this test, whose ignored test `rank_body` is one
//! rank of a job whose ranks meet in a shared-directory store; it writes what it reached to a file.
#![cfg(all(feature = "candle", feature = "data"))]

#[path = "common/ranks.rs"]
mod ranks;
#[allow(dead_code)]
#[path = "../examples/train_mnist/main.rs"]
mod train_mnist;

use std::path::{Path, PathBuf};

use clap::Parser;

/// Runs `rank_body` with `args` on `np` ranks; returns whether every rank succeeded and
/// what each rank reported (its last-epoch accuracy, or `error: ` and its error).
fn launch(np: usize, args: &str, out: &Path) -> (bool, Vec<String>) {
    let reports = out.join(format!("np{np}"));
    std::fs::create_dir_all(&reports).unwrap();
    let store = tempfile::tempdir().unwrap();
    let succeeded = ranks::run_ranks(
        np,
        store.path(),
        &[
            ("HVD_TEST_ARGS", args),
            ("HVD_TEST_OUT", reports.to_str().unwrap()),
            ("RAYON_NUM_THREADS", "1"),
        ],
    );
    let reports = (0..np)
        .map(|rank| std::fs::read_to_string(reports.join(rank.to_string())).unwrap_or_default())
        .collect();
    (succeeded, reports)
}

/// Trains with `args` on `np` ranks; returns rank 0's last-epoch accuracy in %.
fn accuracy(np: usize, args: &str, out: &Path) -> f64 {
    let (succeeded, reports) = launch(np, args, out);
    assert!(succeeded, "{reports:?}");
    100.0 * reports[0].parse::<f64>().unwrap()
}

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn rank_body() {
    let args = std::env::var("HVD_TEST_ARGS").unwrap();
    let args = train_mnist::Args::try_parse_from(
        std::iter::once("train_mnist").chain(args.split_whitespace()),
    )
    .unwrap();
    let report = PathBuf::from(std::env::var("HVD_TEST_OUT").unwrap())
        .join(std::env::var("HVD_RANK").unwrap());
    match train_mnist::train(&args) {
        Ok(summary) => std::fs::write(report, summary.accuracy.to_string()).unwrap(),
        Err(err) => {
            std::fs::write(report, format!("error: {err}")).unwrap();
            std::process::exit(1);
        }
    }
}

#[test]
fn two_ranks_reach_the_accuracy_of_one_rank_with_the_same_global_batch() {
    let out = tempfile::tempdir().unwrap();
    let checkpoint = out.path().join("model.safetensors");
    let args = "--epochs 2 --batch 32 --synthetic-examples 6000";
    let one = accuracy(
        1,
        &format!("{args} --checkpoint {}", checkpoint.display()),
        out.path(),
    );
    let two = accuracy(2, args, out.path());
    assert!(one > 80.0, "the model learns: {one}%");
    assert!((one - two).abs() <= 1.0, "1 rank {one}%, 2 ranks {two}%");

    let saved = candle_core::safetensors::load(&checkpoint, &candle_core::Device::Cpu).unwrap();
    let mut shapes: Vec<(String, Vec<usize>)> = saved
        .iter()
        .map(|(name, t)| (name.clone(), t.dims().to_vec()))
        .collect();
    shapes.sort();
    assert_eq!(
        shapes,
        [
            ("hidden.bias".to_string(), vec![128]),
            ("hidden.weight".to_string(), vec![128, 784]),
            ("output.bias".to_string(), vec![10]),
            ("output.weight".to_string(), vec![10, 128]),
        ]
    );
}

#[test]
fn a_global_batch_that_the_ranks_cannot_share_is_refused() {
    let out = tempfile::tempdir().unwrap();
    let (succeeded, reports) = launch(2, "--batch 33 --synthetic-examples 60", out.path());
    assert!(!succeeded);
    assert_eq!(
        reports[0],
        "error: --batch 33 must be a positive multiple of the number of ranks (2)"
    );
}

#[test]
fn a_batch_larger_than_the_training_set_is_refused() {
    let args = train_mnist::Args::parse_from([
        "train_mnist",
        "--batch",
        "64",
        "--synthetic-examples",
        "60",
    ]);
    let err = train_mnist::train(&args).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--batch 64 is larger than the training set (60 examples): no step could run"
    );
}

#[test]
fn zero_epochs_are_refused() {
    let args = train_mnist::Args::parse_from(["train_mnist", "--epochs", "0"]);
    let err = train_mnist::train(&args).unwrap_err();
    assert_eq!(err.to_string(), "--epochs must be at least 1");
}

/// Without candle's CUDA support (or a GPU), `--device cuda` says what it needs.
#[test]
#[cfg(not(feature = "candle-cuda"))]
fn cuda_without_candles_cuda_support_says_how_to_build_it() {
    let args = train_mnist::Args::parse_from(["train_mnist", "--device", "cuda"]);
    let err = train_mnist::train(&args).unwrap_err().to_string();
    assert!(
        err.starts_with("--device cuda: ")
            && err.ends_with("(build with --features hvd/candle-cuda, on a machine with a GPU)"),
        "{err}"
    );
}

/// Writes an IDX file of unsigned bytes: the magic, the dims, then `data`.
fn write_idx(path: &Path, dims: &[u32], data: &[u8]) {
    let mut bytes = vec![0, 0, 8, dims.len() as u8];
    dims.iter().for_each(|d| bytes.extend(d.to_be_bytes()));
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn mnist_idx_files_are_read_and_bad_ones_named() {
    let dir = tempfile::tempdir().unwrap();
    let image = |value: u8| vec![value; 28 * 28];
    let write_split = |images: &str, labels: &str, pixels: &[u8], digits: &[u8]| {
        write_idx(
            &dir.path().join(images),
            &[digits.len() as u32, 28, 28],
            pixels,
        );
        write_idx(&dir.path().join(labels), &[digits.len() as u32], digits);
    };
    let missing = train_mnist::data::mnist(dir.path())
        .err()
        .unwrap()
        .to_string();
    let train_images = dir.path().join("train-images-idx3-ubyte");
    assert!(
        missing.starts_with(&format!("{}: ", train_images.display()))
            && missing.ends_with("(download MNIST and gunzip its four files into that directory)"),
        "{missing}"
    );

    write_split(
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        &[image(255), image(0), image(51)].concat(),
        &[7, 0, 3],
    );
    write_split(
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
        &image(255),
        &[9],
    );
    let dataset = train_mnist::data::mnist(dir.path()).unwrap();
    assert_eq!((dataset.train.len(), dataset.test.len()), (3, 1));
    let (images, labels) = dataset
        .train
        .batch(&[2, 0], &candle_core::Device::Cpu)
        .unwrap();
    assert_eq!(labels.to_vec1::<u32>().unwrap(), vec![3, 7]);
    let images = images.to_vec2::<f32>().unwrap();
    assert!((images[0][0] - 0.2).abs() < 1e-6 && images[1][783] == 1.0);

    write_idx(&train_images, &[3, 28, 27], &[0; 3 * 28 * 27]);
    assert_eq!(
        train_mnist::data::mnist(dir.path())
            .err()
            .unwrap()
            .to_string(),
        format!(
            "{}: not an MNIST IDX file: images are 28x27, not 28x28",
            train_images.display()
        )
    );
    std::fs::write(&train_images, b"GIF89a").unwrap();
    assert_eq!(
        train_mnist::data::mnist(dir.path())
            .err()
            .unwrap()
            .to_string(),
        format!(
            "{}: not an MNIST IDX file: expected the header of a 3-D file of unsigned bytes",
            train_images.display()
        )
    );
}

/// The pixels and labels hvd's loader hands the training loop, in the order of its
/// sampler's first step: all of `split`'s examples, as `(n, 784)` rows.
fn through_the_loader(split: train_mnist::data::Split) -> (Vec<usize>, Vec<f32>, Vec<i64>) {
    use hvd::data::{Augment, ElasticSampler, Loader, LoaderOptions};
    let sampler = ElasticSampler::new(split.len(), split.len()).seed(Some(3));
    let options = LoaderOptions {
        threads: 2,
        ..Default::default()
    };
    let mut loader = Loader::new(split.into_source(), Augment::exact(28, 1), options).unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let batch = epoch.next_batch().unwrap().unwrap();
    assert_eq!(batch.shape(), [batch.len(), 1, 28, 28]);
    (
        batch.indices().to_vec(),
        batch.images().to_vec(),
        batch.labels().to_vec(),
    )
}

#[test]
fn the_loader_feeds_the_very_pixels_and_labels_of_the_dataset() {
    let cpu = candle_core::Device::Cpu;
    // The synthetic stand-in's floats, twice: one copy for the loader, one to compare.
    let expected = |split: &train_mnist::data::Split, indices: &[usize]| {
        let (images, labels) = split.batch(indices, &cpu).unwrap();
        let images: Vec<f32> = images.flatten_all().unwrap().to_vec1().unwrap();
        let labels: Vec<i64> = labels
            .to_vec1::<u32>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect();
        (images, labels)
    };
    let reference = train_mnist::data::synthetic(60, 10).train;
    let (indices, images, labels) = through_the_loader(train_mnist::data::synthetic(60, 10).train);
    assert_eq!((images, labels), expected(&reference, &indices));

    // MNIST's bytes: v / 255, as the test split's batches have them.
    let dir = tempfile::tempdir().unwrap();
    let pixels: Vec<u8> = (0..5 * 784).map(|i| (i * 7 % 256) as u8).collect();
    for (images, labels) in [
        ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    ] {
        write_idx(&dir.path().join(images), &[5, 28, 28], &pixels);
        write_idx(&dir.path().join(labels), &[5], &[4, 1, 0, 9, 2]);
    }
    let reference = train_mnist::data::mnist(dir.path()).unwrap().train;
    let train = train_mnist::data::mnist(dir.path()).unwrap().train;
    let (indices, images, labels) = through_the_loader(train);
    assert_eq!((images, labels), expected(&reference, &indices));
}
