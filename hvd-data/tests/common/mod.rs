//! Test datasets made on the spot: JPEG files, class folders and tar shards.

#![allow(dead_code)] // Each test binary uses some of these.

use std::fs;
use std::path::{Path, PathBuf};

use jpeg_encoder::{ColorType, Encoder};

/// A `width` × `height` JPEG of one colour.
pub fn jpeg(width: u16, height: u16, rgb: [u8; 3]) -> Vec<u8> {
    let pixels: Vec<u8> = (0..usize::from(width) * usize::from(height))
        .flat_map(|_| rgb)
        .collect();
    let mut bytes = Vec::new();
    Encoder::new(&mut bytes, 90)
        .encode(&pixels, width, height, ColorType::Rgb)
        .expect("encoding a JPEG in memory");
    bytes
}

/// The colour sample `n` of a made-up dataset has, so tests can check what they got.
pub fn colour(n: usize) -> [u8; 3] {
    [(n * 40 % 256) as u8, 200, 30]
}

/// `root/class<c>/img<i>.jpg`: `per_class` images in each of `classes` classes, sizes
/// varying with the sample.
pub fn image_folder(root: &Path, classes: usize, per_class: usize) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for class in 0..classes {
        let dir = root.join(format!("class{class}"));
        fs::create_dir_all(&dir).unwrap();
        for i in 0..per_class {
            let n = class * per_class + i;
            let path = dir.join(format!("img{i:03}.jpg"));
            fs::write(&path, jpeg(24 + n as u16 % 9, 20 + n as u16 % 5, colour(n))).unwrap();
            files.push(path);
        }
    }
    files
}

/// A tar shard of `(member name, bytes)`.
pub fn shard(path: &Path, members: &[(String, Vec<u8>)]) {
    let mut builder = tar::Builder::new(fs::File::create(path).unwrap());
    for (name, bytes) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, &bytes[..]).unwrap();
    }
    builder.finish().unwrap();
}

/// A WebDataset sample's members: `key.jpg` and `key.cls`.
pub fn sample_members(key: &str, image: Vec<u8>, label: i64) -> Vec<(String, Vec<u8>)> {
    vec![
        (format!("{key}.jpg"), image),
        (format!("{key}.cls"), label.to_string().into_bytes()),
    ]
}
