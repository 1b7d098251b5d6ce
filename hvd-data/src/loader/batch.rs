//! A batch as the loader hands it over: a buffer the decode threads filled, on loan to
//! the training loop until it is dropped, then filled again.

use std::sync::Arc;

use super::buffer::BatchBuffer;
use super::queue::Queue;

/// This rank's share of one step: `len()` images as one `len × channels × size × size` block
/// of `f32`s (NCHW) and their labels. Dropping it gives its buffer back to the loader;
/// while it is held, its buffer is one fewer for the decode threads to fill ahead.
/// It owns what it needs (it may be sent to another thread, or outlive its epoch), so a
/// framework can take its memory as a tensor without a copy.
#[derive(Debug)]
pub struct Batch {
    pub(crate) buffer: Option<BatchBuffer>,
    pub(crate) queue: Arc<Queue>,
    /// One image's `[channels, size, size]`.
    pub(crate) sample: [usize; 3],
}

impl Batch {
    fn buffer(&self) -> &BatchBuffer {
        self.buffer
            .as_ref()
            .expect("a batch holds its buffer until dropped")
    }

    /// Which step of the epoch's remaining steps this is (0 for the first batch the epoch
    /// handed over).
    pub fn step(&self) -> usize {
        self.buffer().step
    }

    /// How many images the batch holds (fewer than the share when samples were skipped).
    pub fn len(&self) -> usize {
        self.buffer().labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `[len, channels, size, size]` (channels 3, or 1 for grey).
    pub fn shape(&self) -> [usize; 4] {
        let [channels, height, width] = self.sample;
        [self.len(), channels, height, width]
    }

    /// The images, NCHW, normalised; the first on a 64-byte boundary.
    pub fn images(&self) -> &[f32] {
        self.buffer().images.as_slice()
    }

    /// The images, to change in place (or to lend to a framework as a tensor's memory).
    pub fn images_mut(&mut self) -> &mut [f32] {
        self.buffer
            .as_mut()
            .expect("a batch holds its buffer until dropped")
            .images
            .as_mut_slice()
    }

    /// Each image's class; the first on a 64-byte boundary.
    pub fn labels(&self) -> &[i64] {
        self.buffer().labels.as_slice()
    }

    /// Each image's sample number in the source.
    pub fn indices(&self) -> &[usize] {
        &self.buffer().indices
    }

    /// How many of the step's samples were bad and skipped (only with
    /// [`LoaderOptions::skip_bad`](super::LoaderOptions::skip_bad)).
    pub fn skipped(&self) -> usize {
        self.buffer().skipped
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.queue.give_back(buffer);
        }
    }
}
