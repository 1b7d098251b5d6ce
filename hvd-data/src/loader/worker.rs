//! A decode thread: claims a step, reads, decodes and augments each of its samples into
//! the step's buffer, hands it over, and goes on until the epoch is done or stopping.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use hvd_core::sampler::ElasticSampler;

use super::buffer::BatchBuffer;
use super::meter::DecodeMeter;
use super::queue::Queue;
use crate::augment::{Augment, Resample};
use crate::decode::decode;
use crate::source::Source;
use crate::{Error, Result};

/// What every decode thread of one epoch reads.
#[derive(Debug)]
pub(crate) struct Job {
    pub source: Arc<dyn Source>,
    pub augment: Arc<Augment>,
    pub sampler: ElasticSampler,
    pub rank: usize,
    pub size: usize,
    pub seed: u64,
    pub skip_bad: bool,
    /// The threads' priority ([`LoaderOptions::priority`](super::LoaderOptions::priority)),
    /// resolved for this epoch.
    pub priority: super::DecodePriority,
    pub meter: Arc<DecodeMeter>,
}

/// A thread's buffers, reused from sample to sample.
#[derive(Debug, Default)]
struct Scratch {
    bytes: Vec<u8>,
    pixels: Vec<u8>,
    resample: Resample,
}

pub(crate) fn run(job: &Job, queue: &Queue) {
    // Counted out however the thread ends, so the loop never waits on a dead thread.
    struct Exit<'a>(&'a Queue);
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            self.0.exited();
        }
    }
    let _exit = Exit(queue);
    super::priority::lower_this_thread(job.priority);
    let mut scratch = Scratch::default();
    while let Some((step, mut buffer)) = queue.claim() {
        let filled = match fill(job, queue, step, &mut buffer, &mut scratch) {
            Ok(()) => Ok(buffer),
            Err(error) => Err((buffer, error)),
        };
        queue.finish(step, filled);
    }
}

fn fill(
    job: &Job,
    queue: &Queue,
    step: usize,
    buffer: &mut BatchBuffer,
    scratch: &mut Scratch,
) -> Result<()> {
    let indices = job.sampler.batch_ahead(step, job.rank, job.size);
    let sample_len = job.augment.sample_len();
    buffer.reset(step, indices.len(), sample_len);
    for &index in indices {
        if queue.is_stopping() {
            break;
        }
        let start = buffer.images.len();
        let out = buffer.images.grow(sample_len);
        let began = Instant::now();
        let loaded = catch_unwind(AssertUnwindSafe(|| load(job, index, scratch, out)))
            .unwrap_or_else(|panic| {
                *scratch = Scratch::default();
                Err(Error::sample(
                    index,
                    job.source.name(index),
                    format!("the decoder panicked: {}", panic_message(&*panic)),
                ))
            });
        match loaded {
            Ok(label) => {
                job.meter.image(began.elapsed());
                buffer.labels.push(label);
                buffer.indices.push(index);
            }
            Err(error) if job.skip_bad => {
                tracing::warn!(%error, "skipping a bad sample");
                buffer.images.truncate(start);
                buffer.skipped += 1;
            }
            Err(error) => return Err(error),
        }
    }
    job.meter.batch();
    Ok(())
}

/// Sample `index`, augmented into `out`; its label.
fn load(job: &Job, index: usize, scratch: &mut Scratch, out: &mut [f32]) -> Result<i64> {
    let sample = job.source.read(index, &mut scratch.bytes)?;
    let bad = |reason: String| Error::sample(index, job.source.name(index), reason);
    let image = decode(&scratch.bytes, sample.encoding, &mut scratch.pixels).map_err(bad)?;
    let epoch = job.sampler.epoch();
    let crop = job
        .augment
        .plan(job.seed, epoch, index, image.width, image.height);
    job.augment
        .apply(image, crop, &mut scratch.resample, out)
        .map_err(bad)?;
    Ok(sample.label)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}
