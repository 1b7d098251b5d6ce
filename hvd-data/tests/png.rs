//! PNG files become 8-bit RGB: grey repeated, alpha dropped, 16-bit samples cut to 8
//! bits. Folders and shards find them by extension; a corrupt or truncated file is an
//! error naming the sample.

mod common;

use hvd_data::source::{Encoding, Sample};
use hvd_data::{
    Augment, ElasticSampler, ImageFolder, InMemory, Loader, LoaderOptions, Source, TarShards,
};
use zune_png::PngEncoder;
use zune_png::zune_core::bit_depth::BitDepth;
use zune_png::zune_core::colorspace::ColorSpace;
use zune_png::zune_core::options::EncoderOptions;

/// A 2 x 2 PNG of `data` (16-bit samples big-endian, as the format stores them).
fn png(colorspace: ColorSpace, depth: BitDepth, data: &[u8]) -> Vec<u8> {
    let options = EncoderOptions::new(2, 2, colorspace, depth);
    let mut out = Vec::new();
    PngEncoder::new(data, options).encode(&mut out).unwrap();
    out
}

/// The loader's first batch of `source`, one image a batch, taken as it is: `v / 255`,
/// channel-major.
fn images(source: impl Source + 'static) -> Result<Vec<Vec<f32>>, String> {
    let sampler = ElasticSampler::new(source.len(), 1).seed(None);
    let options = LoaderOptions {
        threads: 1,
        ..Default::default()
    };
    let mut loader = Loader::new(source, Augment::exact(2, 3), options).unwrap();
    let mut epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let mut out = Vec::new();
    while let Some(batch) = epoch.next_batch().map_err(|e| e.to_string())? {
        out.push(batch.images().to_vec());
    }
    Ok(out)
}

fn in_memory(files: Vec<Vec<u8>>) -> InMemory {
    let mut source = InMemory::default();
    for (label, bytes) in files.into_iter().enumerate() {
        let encoding = Encoding::Png;
        source.push(
            bytes,
            Sample {
                label: label as i64,
                encoding,
            },
        );
    }
    source
}

/// Channel-major `v / 255` of 2 x 2 RGB pixels.
fn planes(rgb: [[u8; 3]; 4]) -> Vec<f32> {
    (0..3)
        .flat_map(|c| rgb.iter().map(move |p| f32::from(p[c]) / 255.0))
        .collect()
}

const RGB: [[u8; 3]; 4] = [[10, 20, 30], [40, 50, 60], [70, 80, 90], [100, 110, 120]];
const GREY: [u8; 4] = [5, 100, 200, 255];

#[test]
fn every_colour_type_and_depth_becomes_8_bit_rgb() {
    let flat: Vec<u8> = RGB.concat();
    let rgba: Vec<u8> = RGB.iter().flat_map(|p| [p[0], p[1], p[2], 9]).collect();
    let grey_alpha: Vec<u8> = GREY.iter().flat_map(|&v| [v, 0]).collect();
    // v * 257 is v in both bytes: any fair cut to 8 bits gives v back.
    let wide = |values: &[u8]| -> Vec<u8> { values.iter().flat_map(|&v| [v, v]).collect() };
    let files = vec![
        png(ColorSpace::RGB, BitDepth::Eight, &flat),
        png(ColorSpace::RGBA, BitDepth::Eight, &rgba),
        png(ColorSpace::Luma, BitDepth::Eight, &GREY),
        png(ColorSpace::LumaA, BitDepth::Eight, &grey_alpha),
        png(ColorSpace::RGB, BitDepth::Sixteen, &wide(&flat)),
        png(ColorSpace::Luma, BitDepth::Sixteen, &wide(&GREY)),
    ];
    let grey = planes(GREY.map(|v| [v; 3]));
    let expected = [
        planes(RGB),
        planes(RGB),
        grey.clone(),
        grey.clone(),
        planes(RGB),
        grey,
    ];
    assert_eq!(images(in_memory(files)).unwrap(), expected);
}

#[test]
fn a_truncated_or_corrupt_png_is_an_error_naming_the_sample() {
    let whole = png(ColorSpace::RGB, BitDepth::Eight, &RGB.concat());
    let truncated = whole[..whole.len() / 2].to_vec();
    let mut corrupt = whole.clone();
    corrupt[1] ^= 0xff; // the signature
    for (bytes, what) in [(truncated, "truncated"), (corrupt, "corrupt")] {
        let error = images(in_memory(vec![bytes])).unwrap_err();
        assert!(
            error.contains("in-memory sample 0") && error.contains("invalid PNG"),
            "{what}: {error}"
        );
    }
}

#[test]
fn a_folder_finds_pngs_by_extension_in_either_case() {
    let root = tempfile::tempdir().unwrap();
    let class = root.path().join("cats");
    std::fs::create_dir(&class).unwrap();
    std::fs::write(
        class.join("a.png"),
        png(ColorSpace::Luma, BitDepth::Eight, &GREY),
    )
    .unwrap();
    std::fs::write(
        class.join("b.PNG"),
        png(ColorSpace::RGB, BitDepth::Eight, &RGB.concat()),
    )
    .unwrap();
    std::fs::write(class.join("notes.txt"), "not an image").unwrap();
    let folder = ImageFolder::open(root.path()).unwrap();
    assert_eq!(folder.len(), 2);
    let expected = vec![planes(GREY.map(|v| [v; 3])), planes(RGB)];
    assert_eq!(images(folder).unwrap(), expected);
}

#[test]
fn a_shard_takes_a_png_member_as_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard-0.tar");
    let image = png(ColorSpace::RGB, BitDepth::Eight, &RGB.concat());
    common::shard(
        &path,
        &[
            ("x1.png".to_string(), image),
            ("x1.cls".to_string(), b"3".to_vec()),
        ],
    );
    let shards = TarShards::open([&path]).unwrap();
    assert_eq!(shards.len(), 1);
    assert_eq!(images(shards).unwrap(), vec![planes(RGB)]);
}
