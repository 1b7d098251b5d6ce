//! Where samples come from. A [`Source`] numbers its samples `0..len` in an order that is
//! the same on every rank (the elastic sampler permutes those numbers), and reads one
//! sample's encoded bytes on demand, from any decode thread.

mod folder;
mod memory;
mod shards;
mod synthetic;

pub use folder::ImageFolder;
pub use memory::InMemory;
pub use shards::TarShards;
pub use synthetic::Synthetic;

use crate::Result;

/// How a sample's bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// A JPEG file (baseline or progressive; grey, RGB or CMYK).
    Jpeg,
    /// A PNG file (grey or RGB, with or without alpha, 8 or 16 bits; palettes of 1 to 8
    /// bits, with or without transparency): taken as 8-bit RGB, its alpha dropped (as
    /// Pillow's `convert("RGB")` does).
    Png,
    /// Decoded pixels, 3 bytes (R, G, B) each, row after row.
    Rgb { width: u32, height: u32 },
    /// Decoded grey pixels, one byte each, row after row (MNIST's IDX files).
    Grey { width: u32, height: u32 },
    /// Decoded values, `channels` native-endian `f32`s a pixel (interleaved), row after
    /// row: samples already in the range the model wants, taken as they are. Only
    /// [`Augment::exact`](crate::Augment::exact) takes them (no resize of floats).
    F32 {
        width: u32,
        height: u32,
        channels: u32,
    },
}

/// What a source says about a sample it has read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The class (`i64`, which PyTorch's losses take).
    pub label: i64,
    pub encoding: Encoding,
}

/// A dataset of labelled images, read one sample at a time from any thread.
pub trait Source: Send + Sync + std::fmt::Debug {
    /// How many samples there are: they are numbered `0..len`.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads sample `index` into `bytes` (replacing what it held, reusing its capacity).
    /// An error names the file and the sample.
    fn read(&self, index: usize, bytes: &mut Vec<u8>) -> Result<Sample>;

    /// What errors call sample `index`: its file, or its shard and member.
    fn name(&self, index: usize) -> String;
}

/// The image files a folder or shard may hold; others are ignored.
/// A source chosen at run time (`Box<dyn Source>`) is a source.
impl<S: Source + ?Sized> Source for Box<S> {
    fn len(&self) -> usize {
        (**self).len()
    }

    fn read(&self, index: usize, bytes: &mut Vec<u8>) -> Result<Sample> {
        (**self).read(index, bytes)
    }

    fn name(&self, index: usize) -> String {
        (**self).name(index)
    }
}

pub(crate) fn image_encoding(extension: &str) -> Option<Encoding> {
    match extension.to_ascii_lowercase().as_str() {
        "jpg" | "jpeg" => Some(Encoding::Jpeg),
        "png" => Some(Encoding::Png),
        _ => None,
    }
}
