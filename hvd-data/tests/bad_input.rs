//! Bad input is an error that names the file and the sample, or a counted skip when asked
//! for; never a panic or a hang.

mod common;

use std::fs;

use hvd_data::{
    Augment, ElasticSampler, Error, ImageFolder, InMemory, Loader, LoaderOptions, TarShards,
};

fn options(skip_bad: bool) -> LoaderOptions {
    LoaderOptions {
        threads: 2,
        prefetch: 2,
        skip_bad,
        ..Default::default()
    }
}

/// Runs one unshuffled epoch on one rank in batches of `batch`: each step's indices, or
/// its error's text.
fn steps(loader: &mut Loader, batch: usize) -> Vec<Result<Vec<usize>, String>> {
    let sampler = ElasticSampler::new(loader.source().len(), batch).seed(None);
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let mut out = Vec::new();
    for _ in 0..epoch.steps() {
        out.push(match epoch.next_batch() {
            Ok(batch) => Ok(batch.expect("a batch for each step").indices().to_vec()),
            Err(e) => Err(e.to_string()),
        });
    }
    assert!(epoch.next_batch().unwrap().is_none());
    out
}

#[test]
fn a_corrupt_jpeg_fails_its_step_naming_the_file_and_sample_and_the_epoch_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::image_folder(dir.path(), 2, 4);
    fs::write(&files[5], b"\xff\xd8\xff\xe0 this is not a JPEG at all").unwrap();
    let mut loader = Loader::new(
        ImageFolder::open(dir.path()).unwrap(),
        Augment::train(8),
        options(false),
    )
    .unwrap();
    let steps = steps(&mut loader, 3);
    assert_eq!(steps[0], Ok(vec![0, 1, 2]));
    let err = steps[1].clone().unwrap_err();
    let prefix = format!("sample 5 ({}): invalid JPEG", files[5].display());
    assert!(err.starts_with(&prefix), "{err}");
    assert_eq!(steps[2], Ok(vec![6, 7]));
}

#[test]
fn a_truncated_jpeg_is_an_error_not_an_image_padded_with_grey() {
    let whole = common::jpeg(64, 48, [10, 20, 30]);
    let cut = whole[..whole.len() * 2 / 3].to_vec();
    let mut loader = Loader::new(
        InMemory::jpegs([(whole, 0), (cut, 1)]),
        Augment::eval(16),
        options(false),
    )
    .unwrap();
    let steps = steps(&mut loader, 1);
    assert_eq!(steps[0], Ok(vec![0]));
    let err = steps[1].clone().unwrap_err();
    assert!(
        err.starts_with("sample 1 (in-memory sample 1): invalid JPEG"),
        "{err}"
    );
}

#[test]
fn skipping_bad_samples_counts_them_and_keeps_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::image_folder(dir.path(), 1, 6);
    fs::write(&files[1], b"garbage").unwrap();
    let whole = fs::read(&files[4]).unwrap();
    fs::write(&files[4], &whole[..whole.len() / 2]).unwrap();
    let mut loader = Loader::new(
        ImageFolder::open(dir.path()).unwrap(),
        Augment::train(8),
        options(true),
    )
    .unwrap();
    let sampler = ElasticSampler::new(6, 6).seed(None);
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let batch = epoch.next_batch().unwrap().unwrap();
    assert_eq!(batch.indices(), [0, 2, 3, 5]);
    assert_eq!(batch.labels().len(), 4);
    assert_eq!(batch.images().len(), 4 * 3 * 64);
    assert_eq!(batch.skipped(), 2);
    drop(batch);
    assert_eq!(epoch.skipped(), 2);
}

#[test]
fn a_file_gone_after_listing_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::image_folder(dir.path(), 2, 2);
    let source = ImageFolder::open(dir.path()).unwrap();
    fs::remove_file(&files[2]).unwrap();
    let mut loader = Loader::new(source, Augment::train(8), options(false)).unwrap();
    let steps = steps(&mut loader, 2);
    let expected = format!(
        "sample 2 ({}): No such file or directory (os error 2)",
        files[2].display()
    );
    assert_eq!(steps[1], Err(expected));
}

#[test]
fn a_folder_without_images_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("cats")).unwrap();
    let err = ImageFolder::open(dir.path()).unwrap_err().to_string();
    let expected = format!(
        "{}: no images (.jpg, .jpeg, .png) in any sub-folder: expected root/<class>/<image>.jpg",
        dir.path().display()
    );
    assert_eq!(err, expected);
    let missing = dir.path().join("nowhere");
    let err = ImageFolder::open(&missing).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

#[test]
fn an_empty_shard_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (good, empty) = (dir.path().join("good.tar"), dir.path().join("empty.tar"));
    common::shard(
        &good,
        &common::sample_members("a", common::jpeg(8, 8, [1, 2, 3]), 0),
    );
    common::shard(&empty, &[]);
    let err = TarShards::open([&good, &empty]).unwrap_err();
    assert!(matches!(err, Error::Source { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("{}: empty shard: no samples in it", empty.display())
    );
}

#[test]
fn a_shard_cut_short_is_an_error_naming_the_shard_and_member() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.tar");
    let mut members = common::sample_members("a", common::jpeg(8, 8, [1, 2, 3]), 0);
    members.extend(common::sample_members(
        "b",
        common::jpeg(64, 64, [9, 9, 9]),
        1,
    ));
    common::shard(&path, &members);
    let whole = fs::read(&path).unwrap();
    // b.jpg's data starts after its 512-byte header, which is whole.
    let b_data = whole
        .windows(4)
        .rposition(|w| w == b"\xff\xd8\xff\xe0")
        .unwrap();
    let shard = path.display();

    // Cut before indexing: refused when the shard is opened.
    fs::write(&path, &whole[..b_data + 100]).unwrap();
    let err = TarShards::open([&path]).unwrap_err().to_string();
    let expected = format!("{shard}: b.jpg: the shard is cut short: the member ends at byte");
    assert!(err.starts_with(&expected), "{err}");

    // Cut after indexing: the sample's step fails.
    fs::write(&path, &whole).unwrap();
    let source = TarShards::open([&path]).unwrap();
    fs::write(&path, &whole[..b_data + 100]).unwrap();
    let mut loader = Loader::new(source, Augment::train(8), options(false)).unwrap();
    let err = steps(&mut loader, 1)[1].clone().unwrap_err();
    let expected = format!("sample 1 ({shard}:b.jpg): shard ends after 100 of the member's");
    assert!(err.starts_with(&expected), "{err}");
}

#[test]
fn a_sample_without_its_class_and_a_bad_class_are_refused_naming_the_member() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.tar");
    common::shard(&path, &[("x/a.jpg".into(), common::jpeg(8, 8, [0, 0, 0]))]);
    let err = TarShards::open([&path]).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: sample \"x/a\" has an image but no .cls class",
            path.display()
        )
    );
    common::shard(
        &path,
        &[
            ("a.jpg".into(), common::jpeg(8, 8, [0, 0, 0])),
            ("a.cls".into(), b"cat".to_vec()),
        ],
    );
    let err = TarShards::open([&path]).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("{}: a.cls: class \"cat\" is not an integer", path.display())
    );
}
