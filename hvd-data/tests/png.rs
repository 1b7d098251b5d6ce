//! PNG files become 8-bit RGB: grey repeated, alpha dropped, 16-bit samples cut to 8
//! bits, palette indices looked up. Folders and shards find them by extension; a corrupt or truncated file is an
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

/// A 2 x 2 palette PNG written by hand (the encoder writes none): `bits` per index,
/// `palette` RGB entries, `alpha` its tRNS chunk if any, `rows` the indices of each row.
/// The pixels go in a stored (uncompressed) deflate block.
fn palette_png(bits: u8, palette: &[[u8; 3]], alpha: Option<&[u8]>, rows: [[u8; 2]; 2]) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data);
        let crc = crc32(&out[start..]);
        out.extend(crc.to_be_bytes());
    }
    let mut scanlines = Vec::new();
    for row in rows {
        scanlines.push(0); // no filter
        // Both indices in one byte, high bits first, or a byte each at 8 bits.
        if bits == 8 {
            scanlines.extend(row);
        } else {
            scanlines.push((row[0] << (8 - bits)) | (row[1] << (8 - 2 * bits)));
        }
    }
    let mut zlib = vec![0x78, 0x01, 0x01]; // zlib header, a final stored block
    let len = scanlines.len() as u16;
    zlib.extend(len.to_le_bytes());
    zlib.extend((!len).to_le_bytes());
    zlib.extend(&scanlines);
    zlib.extend(adler32(&scanlines).to_be_bytes());

    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend(2u32.to_be_bytes());
    header.extend(2u32.to_be_bytes());
    header.extend([bits, 3, 0, 0, 0]); // depth, palette, deflate, no filter, no interlace
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"PLTE", &palette.concat());
    if let Some(alpha) = alpha {
        chunk(&mut out, b"tRNS", alpha);
    }
    chunk(&mut out, b"IDAT", &zlib);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in bytes {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

#[test]
fn palette_pngs_become_their_colours_with_transparency_dropped() {
    let palette = [[250, 0, 0], [0, 250, 0], [0, 0, 250], [7, 8, 9]];
    let rows = [[3, 0], [1, 2]];
    let files = vec![
        palette_png(8, &palette, None, rows),
        palette_png(2, &palette, None, rows),
        // tRNS makes the decoder give alpha, which the loader drops.
        palette_png(8, &palette, Some(&[0, 128, 255, 64]), rows),
        palette_png(4, &palette, Some(&[10]), rows),
    ];
    let expected = planes([palette[3], palette[0], palette[1], palette[2]]);
    assert_eq!(images(in_memory(files)).unwrap(), vec![expected; 4]);
}
