//! What a batch is made in: one of the loader's fixed set of buffers, filled by a decode
//! thread, lent to the training loop as a [`Batch`](super::Batch), then filled again.

use super::aligned::Aligned;

/// One buffer's contents; the loader keeps a fixed set of them and reuses them.
#[derive(Debug, Default)]
pub(crate) struct BatchBuffer {
    pub step: usize,
    /// Both on a 64-byte boundary, which TensorFlow demands of a tensor's memory.
    pub images: Aligned<f32>,
    pub labels: Aligned<i64>,
    pub indices: Vec<usize>,
    pub skipped: usize,
}

impl BatchBuffer {
    /// Empties the buffer for `step`, keeping room for `samples` of `sample_len` floats so
    /// that filling it allocates nothing.
    pub fn reset(&mut self, step: usize, samples: usize, sample_len: usize) {
        self.step = step;
        self.images.reset(samples * sample_len);
        self.labels.reset(samples);
        self.indices.clear();
        self.indices.reserve(samples);
        self.skipped = 0;
    }
}
