//! Samples held in memory: for tests, and for datasets small enough to preload.

use super::{Encoding, Sample, Source};
use crate::{Error, Result};

/// Encoded samples in memory, each with its label.
#[derive(Debug, Clone, Default)]
pub struct InMemory {
    samples: Vec<(Vec<u8>, Sample)>,
}

impl InMemory {
    /// JPEG files' bytes with their labels.
    pub fn jpegs(samples: impl IntoIterator<Item = (Vec<u8>, i64)>) -> Self {
        InMemory {
            samples: samples
                .into_iter()
                .map(|(bytes, label)| {
                    let encoding = Encoding::Jpeg;
                    (bytes, Sample { label, encoding })
                })
                .collect(),
        }
    }

    /// Adds one sample of any encoding.
    pub fn push(&mut self, bytes: Vec<u8>, sample: Sample) {
        self.samples.push((bytes, sample));
    }
}

impl Source for InMemory {
    fn len(&self) -> usize {
        self.samples.len()
    }

    fn read(&self, index: usize, bytes: &mut Vec<u8>) -> Result<Sample> {
        let (data, sample) = self
            .samples
            .get(index)
            .ok_or_else(|| Error::sample(index, self.name(index), "no such sample"))?;
        bytes.clear();
        bytes.extend_from_slice(data);
        Ok(*sample)
    }

    fn name(&self, index: usize) -> String {
        format!("in-memory sample {index}")
    }
}
