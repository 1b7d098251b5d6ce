//! Sources number their samples alike on every rank, and a decoded sample holds its image.

mod common;

use hvd_data::source::{Encoding, Sample};
use hvd_data::{Augment, ElasticSampler, ImageFolder, Loader, LoaderOptions, Source, TarShards};

#[test]
fn an_image_folder_numbers_classes_and_files_in_sorted_order() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::image_folder(dir.path(), 3, 4);
    std::fs::write(dir.path().join("class1/notes.txt"), "not an image").unwrap();
    let source = ImageFolder::open(dir.path()).unwrap();
    assert_eq!(source.classes(), ["class0", "class1", "class2"]);
    assert_eq!(source.len(), 12);
    let mut bytes = Vec::new();
    for (index, file) in files.iter().enumerate() {
        assert_eq!(source.name(index), file.display().to_string());
        let sample = source.read(index, &mut bytes).unwrap();
        assert_eq!(
            sample,
            Sample {
                label: index as i64 / 4,
                encoding: Encoding::Jpeg
            }
        );
        assert_eq!(bytes, std::fs::read(file).unwrap());
    }
}

#[test]
fn tar_shards_group_members_by_key_and_read_each_image_from_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    let mut paths = Vec::new();
    for s in 0..2 {
        let mut members = Vec::new();
        for i in 0..3 {
            let image = common::jpeg(16, 16, common::colour(s * 3 + i));
            // The class before the image in one shard, after it in the other.
            let mut sample =
                common::sample_members(&format!("dir/s{s}i{i}"), image.clone(), 10 + i as i64);
            if s == 1 {
                sample.reverse();
            }
            members.extend(sample);
            expected.push((image, 10 + i as i64, format!("dir/s{s}i{i}.jpg")));
        }
        let path = dir.path().join(format!("shard-{s}.tar"));
        common::shard(&path, &members);
        paths.push(path);
    }
    let source = TarShards::open(&paths).unwrap();
    assert_eq!(source.len(), 6);
    let mut bytes = Vec::new();
    for (index, (image, label, member)) in expected.iter().enumerate() {
        let sample = source.read(index, &mut bytes).unwrap();
        assert_eq!(sample.label, *label);
        assert_eq!(&bytes, image, "sample {index}");
        let shard = paths[index / 3].display();
        assert_eq!(source.name(index), format!("{shard}:{member}"));
    }
}

#[test]
fn a_decoded_batch_holds_each_images_colour_normalised() {
    let dir = tempfile::tempdir().unwrap();
    common::image_folder(dir.path(), 2, 3);
    let source = ImageFolder::open(dir.path()).unwrap();
    let sampler = ElasticSampler::new(source.len(), 6).seed(None);
    let augment = Augment::train(8);
    let mut loader = Loader::new(
        source,
        augment.clone(),
        LoaderOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let batch = epoch.next_batch().unwrap().unwrap();
    assert_eq!(batch.shape(), [6, 3, 8, 8]);
    assert_eq!(batch.labels(), [0, 0, 0, 1, 1, 1]);
    assert_eq!(batch.indices(), [0, 1, 2, 3, 4, 5]);
    for (n, image) in batch.images().chunks_exact(3 * 64).enumerate() {
        for (c, plane) in image.chunks_exact(64).enumerate() {
            let want = (f32::from(common::colour(n)[c]) / 255.0 - augment.mean[c]) / augment.std[c];
            // JPEG's chroma is lossy: a few levels of 255, over std ~0.22.
            assert!(
                plane.iter().all(|v| (v - want).abs() < 0.1),
                "sample {n} channel {c}: {} vs {want}",
                plane[0]
            );
        }
    }
    drop(batch);
    assert!(epoch.next_batch().unwrap().is_none());
}

#[test]
fn grey_and_cmyk_jpegs_decode_to_three_channels() {
    let encode = |pixels: &[u8], colour| {
        let mut bytes = Vec::new();
        jpeg_encoder::Encoder::new(&mut bytes, 95)
            .encode(pixels, 16, 12, colour)
            .unwrap();
        bytes
    };
    let grey = encode(&[77; 16 * 12], jpeg_encoder::ColorType::Luma);
    let cmyk = encode(&[0, 0, 0, 0].repeat(16 * 12), jpeg_encoder::ColorType::Cmyk);
    let source = hvd_data::InMemory::jpegs([(grey, 0), (cmyk, 1)]);
    let augment = Augment {
        mean: [0.0; 3],
        std: [1.0; 3],
        ..Augment::eval(4)
    };
    let sampler = ElasticSampler::new(2, 2).seed(None);
    let options = LoaderOptions {
        threads: 1,
        ..Default::default()
    };
    let mut loader = Loader::new(source, augment, options).unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let batch = epoch.next_batch().unwrap().unwrap();
    assert_eq!(batch.shape(), [2, 3, 4, 4]);
    let (grey, cmyk) = batch.images().split_at(48);
    assert!(
        grey.iter().all(|v| (v - 77.0 / 255.0).abs() < 2.0 / 255.0),
        "{grey:?}"
    );
    // A flat image stays flat through the ink-to-light conversion.
    assert!(
        cmyk.iter().all(|v| (v - cmyk[0]).abs() < 2.0 / 255.0),
        "{cmyk:?}"
    );
}
