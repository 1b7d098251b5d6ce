//! Generated images: input that costs no decode, to measure the rest of a job against.

use super::{Encoding, Sample, Source};
use crate::{Error, Result};

/// `len` RGB images of `width` × `height`, each a gradient that depends on its index, with
/// label `index % classes`.
#[derive(Debug, Clone)]
pub struct Synthetic {
    len: usize,
    width: u32,
    height: u32,
    classes: i64,
}

impl Synthetic {
    pub fn new(len: usize, width: u32, height: u32, classes: usize) -> Self {
        Synthetic {
            len,
            width: width.max(1),
            height: height.max(1),
            classes: classes.max(1) as i64,
        }
    }
}

impl Source for Synthetic {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, index: usize, bytes: &mut Vec<u8>) -> Result<Sample> {
        if index >= self.len {
            return Err(Error::sample(index, self.name(index), "no such sample"));
        }
        let (width, height) = (self.width as usize, self.height as usize);
        bytes.clear();
        bytes.reserve(width * height * 3);
        for y in 0..height {
            for x in 0..width {
                let base = index.wrapping_mul(37);
                bytes.push((base + x * 255 / width) as u8);
                bytes.push((base + y * 255 / height) as u8);
                bytes.push(base as u8);
            }
        }
        Ok(Sample {
            label: index as i64 % self.classes,
            encoding: Encoding::Rgb {
                width: self.width,
                height: self.height,
            },
        })
    }

    fn name(&self, index: usize) -> String {
        format!("synthetic sample {index}")
    }
}
