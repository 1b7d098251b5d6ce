//! What the decode threads measure of themselves: how many images and batches they made
//! and how long they were busy making them, for choosing threads and prefetch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters the decode threads add to (a few atomic adds per sample).
#[derive(Debug, Default)]
pub(crate) struct DecodeMeter {
    images: AtomicU64,
    batches: AtomicU64,
    busy_ns: AtomicU64,
}

impl DecodeMeter {
    pub fn image(&self, took: Duration) {
        self.images.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.busy_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn batch(&self) {
        self.batches.fetch_add(1, Ordering::Relaxed);
    }

    /// What was counted since the last call, leaving the counters at zero.
    pub fn take(&self) -> DecodeRate {
        DecodeRate {
            images: self.images.swap(0, Ordering::Relaxed),
            batches: self.batches.swap(0, Ordering::Relaxed),
            busy_seconds: self.busy_ns.swap(0, Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// The decode threads' work over some stretch (an epoch): one thread's time per image,
/// whatever the number of threads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DecodeRate {
    /// Images read, decoded and augmented.
    pub images: u64,
    /// Batches filled.
    pub batches: u64,
    /// The threads' time on those images, added up.
    pub busy_seconds: f64,
}

impl DecodeRate {
    /// One thread's seconds per image; `None` before any image was made.
    pub fn seconds_per_image(&self) -> Option<f64> {
        (self.images > 0).then(|| self.busy_seconds / self.images as f64)
    }

    /// Images per batch, on average.
    pub fn batch_images(&self) -> Option<f64> {
        (self.batches > 0).then(|| self.images as f64 / self.batches as f64)
    }
}
