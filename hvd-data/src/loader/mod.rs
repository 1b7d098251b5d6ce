//! The loader: a pool of decode threads that prepares this rank's next batches while the
//! training loop runs the current one, and hands them over in order.

mod aligned;
mod batch;
mod buffer;
mod meter;
mod priority;
mod queue;
mod tune;
mod worker;

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hvd_core::sampler::ElasticSampler;
use hvd_core::units::MAX_DURATION;

pub use batch::Batch;
use buffer::BatchBuffer;
use meter::DecodeMeter;
pub use meter::DecodeRate;
pub use priority::DecodePriority;
use queue::Queue;
pub use tune::{Load, TuneLimits, Tuning, host_cores, plan, share_cores};
use worker::Job;

use crate::augment::Augment;
use crate::decode::MAX_SIDE;
use crate::source::Source;
use crate::stall::StepTimes;
use crate::{Error, Result};

/// How the loader runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderOptions {
    /// Decode threads. With several ranks on one host, give each its share of the cores.
    pub threads: usize,
    /// Batches prepared ahead of the one the training loop holds.
    pub prefetch: usize,
    /// The seed of the augmentation (the order comes from the sampler's seed).
    pub seed: u64,
    /// Skip (and count) samples that cannot be read or decoded, instead of failing the
    /// step with an error that names them.
    pub skip_bad: bool,
    /// The longest wait for one batch before [`Error::Timeout`].
    pub timeout: Duration,
    /// How the decode threads' CPU time ranks below the training loop's (default 10
    /// `nice` steps; [`DecodePriority::Auto`] for a job whose compute runs on a GPU): on
    /// a host whose cores are all busy, the loop's threads (its allreduce, the launch of
    /// the GPU's work) get a core first, and the decoders take what they leave.
    pub priority: DecodePriority,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            threads: thread::available_parallelism().map_or(1, usize::from),
            prefetch: 2,
            seed: 0,
            skip_bad: false,
            timeout: Duration::from_secs(60),
            priority: DecodePriority::default(),
        }
    }
}

/// Decodes and augments a [`Source`]'s images into batches for one rank.
///
/// Which samples a rank gets comes from an [`ElasticSampler`] that every rank holds
/// alike: [`epoch`](Self::epoch) starts from the sampler's place, so after a resize or
/// a rollback to the last commit, a new `Epoch` from the restored sampler goes on exactly
/// where the job is. Batch buffers live as long as the loader and are reused.
#[derive(Debug)]
pub struct Loader {
    source: Arc<dyn Source>,
    augment: Arc<Augment>,
    options: LoaderOptions,
    /// The buffers between epochs; an epoch takes them and gives them back when dropped.
    buffers: Arc<Mutex<Vec<BatchBuffer>>>,
    meter: Arc<DecodeMeter>,
    /// Whether the last tuning found this rank's share of the cores unable to feed it.
    behind: bool,
}

/// The most decode threads, and batches prepared ahead, a loader takes.
pub const MAX_THREADS_OR_PREFETCH: usize = 1024;

impl Loader {
    pub fn new(
        source: impl Source + 'static,
        augment: Augment,
        options: LoaderOptions,
    ) -> Result<Self> {
        let invalid = |name, reason: &str| {
            Err(Error::Config {
                name,
                reason: reason.into(),
            })
        };
        if options.threads == 0 {
            return invalid(
                "LoaderOptions::threads",
                "0: at least one decode thread is needed",
            );
        }
        if options.prefetch == 0 {
            return invalid(
                "LoaderOptions::prefetch",
                "0: at least one batch must be prepared ahead",
            );
        }
        // Beyond these, the buffers' allocation fails and takes the process with it.
        for (name, value) in [
            ("LoaderOptions::threads", options.threads),
            ("LoaderOptions::prefetch", options.prefetch),
        ] {
            if value > MAX_THREADS_OR_PREFETCH {
                return invalid(name, &format!("{value}: at most {MAX_THREADS_OR_PREFETCH}"));
            }
        }
        if options.timeout.is_zero() || options.timeout > MAX_DURATION {
            return invalid(
                "LoaderOptions::timeout",
                &format!(
                    "{:?}: more than nothing, at most ten years",
                    options.timeout
                ),
            );
        }
        if let Some(reason) = options.priority.invalid() {
            return invalid("LoaderOptions::priority", &reason);
        }
        if augment.size == 0 || augment.size as usize > MAX_SIDE {
            return invalid(
                "Augment::size",
                &format!(
                    "{}: images need at least one pixel, and at most {MAX_SIDE} a side",
                    augment.size
                ),
            );
        }
        if let Some((name, reason)) = augment.invalid() {
            return invalid(name, &reason);
        }
        Ok(Loader {
            source: Arc::new(source),
            augment: Arc::new(augment),
            options,
            buffers: Arc::default(),
            meter: Arc::default(),
            behind: false,
        })
    }

    pub fn source(&self) -> &dyn Source {
        &*self.source
    }

    pub fn augment(&self) -> &Augment {
        &self.augment
    }

    /// The settings the next epoch runs with.
    pub fn options(&self) -> &LoaderOptions {
        &self.options
    }

    /// The priority the next epoch's decode threads run at: `options().priority`, with
    /// [`DecodePriority::Auto`] resolved by the last tuning.
    pub fn decode_priority(&self) -> DecodePriority {
        self.options.priority.resolve(self.behind)
    }

    /// What the decode threads made, and their time on it, since the last call (or the
    /// loader's creation).
    pub fn take_decode_rate(&self) -> DecodeRate {
        self.meter.take()
    }

    /// Sets the next epochs' threads and prefetch from the decode rate measured since
    /// the last call and from `steps` (a [`StepClock`](crate::StepClock)'s, over the same
    /// epoch), within `limits`: [`measure`](Self::measure), then [`tune`](Self::tune).
    /// `None` (nothing changed) until both an image and a step were measured. With
    /// several ranks on a host, `hvd::data_tune::autotune` shares the host's cores by
    /// what each rank measured instead.
    pub fn autotune(&mut self, steps: &[StepTimes], limits: TuneLimits) -> Option<Tuning> {
        let load = self.measure(steps)?;
        Some(self.tune(load, limits))
    }

    /// The load measured since the last call: the decode threads' time per image (taken,
    /// so the next call measures afresh) and the step's time when its batch is ready,
    /// which is its wall time less its wait for data. `None` until both an image and a
    /// step were measured.
    pub fn measure(&mut self, steps: &[StepTimes]) -> Option<Load> {
        let rate = self.take_decode_rate();
        let (per_image, batch_images) = (rate.seconds_per_image()?, rate.batch_images()?);
        if steps.is_empty() {
            return None;
        }
        let fed: f64 = steps.iter().map(|s| (s.wall - s.data).max(0.0)).sum();
        Some(Load {
            seconds_per_image: per_image,
            batch_images,
            step_seconds: fed / steps.len() as f64,
            batch_bytes: batch_images.ceil() as usize * self.augment.sample_len() * 4,
        })
    }

    /// Sets the next epochs' threads and prefetch for `load` within `limits` ([`plan`]),
    /// and whether [`DecodePriority::Auto`] idles. Logs the choice, and a warning when
    /// the rank's share of the host's cores cannot keep up whatever it does.
    pub fn tune(&mut self, load: Load, limits: TuneLimits) -> Tuning {
        let tuning = plan(load, limits);
        self.options.threads = tuning.threads;
        self.options.prefetch = tuning.prefetch;
        self.behind = priority::behind(self.behind, &tuning);
        if tuning.keeps_up() {
            tracing::info!(
                threads = tuning.threads,
                prefetch = tuning.prefetch,
                capacity = tuning.capacity,
                demand = tuning.demand,
                "input pipeline tuned"
            );
        } else {
            tracing::warn!(
                "this host cannot decode fast enough for this rank whatever the loader \
                 does: a step takes {:.3} ms and a batch of {:.0} images {:.3} ms on one \
                 thread, so {} threads are needed and {} are this rank's share ({} cores, \
                 {} ranks on the host): {:.0} images/s made for {:.0} wanted, about {:.0} % \
                 of each step waiting for data",
                load.step_seconds * 1e3,
                load.batch_images,
                load.batch_images * load.seconds_per_image * 1e3,
                tuning.threads_needed,
                limits.cores_per_rank(),
                limits.cores,
                limits.local_ranks,
                tuning.capacity,
                tuning.demand,
                tuning.expected_data_bound() * 100.0
            );
        }
        tuning
    }

    /// Rank `rank` of `size`'s batches from `sampler`'s place to the end of its epoch:
    /// step `k` is [`ElasticSampler::batch_ahead`]`(k, rank, size)`. The sampler must walk
    /// this loader's source.
    pub fn epoch(&mut self, sampler: &ElasticSampler, rank: usize, size: usize) -> Result<Epoch> {
        if sampler.len() != self.source.len() {
            return Err(Error::Config {
                name: "sampler",
                reason: format!(
                    "it walks {} samples but the source has {}",
                    sampler.len(),
                    self.source.len()
                ),
            });
        }
        if rank >= size {
            return Err(Error::Config {
                name: "rank",
                reason: format!("{rank} is not below the job size {size}"),
            });
        }
        let threads = self.options.threads;
        let wanted = threads + self.options.prefetch;
        let mut buffers =
            std::mem::take(&mut *self.buffers.lock().unwrap_or_else(PoisonError::into_inner));
        buffers.resize_with(wanted.max(buffers.len()), BatchBuffer::default);
        let steps = sampler.steps_left();
        let queue = Arc::new(Queue::new(
            buffers,
            steps,
            threads,
            Arc::clone(&self.buffers),
        ));
        let job = Arc::new(Job {
            source: Arc::clone(&self.source),
            augment: Arc::clone(&self.augment),
            sampler: sampler.clone(),
            rank,
            size,
            seed: self.options.seed,
            skip_bad: self.options.skip_bad,
            priority: self.decode_priority(),
            meter: Arc::clone(&self.meter),
        });
        let mut epoch = Epoch {
            rank,
            sample: {
                let side = self.augment.size as usize;
                [self.augment.channels as usize, side, side]
            },
            timeout: self.options.timeout,
            queue: Arc::clone(&queue),
            threads: Vec::with_capacity(threads),
            next: 0,
            steps,
            skipped: 0,
        };
        for n in 0..threads {
            let (job, shared) = (Arc::clone(&job), Arc::clone(&queue));
            let spawned = thread::Builder::new()
                .name(format!("hvd-data-{n}"))
                .spawn(move || worker::run(&job, &shared));
            match spawned {
                Ok(handle) => epoch.threads.push(handle),
                // Dropping `epoch` stops and joins the threads already started.
                Err(e) => {
                    (n..threads).for_each(|_| queue.exited());
                    return Err(Error::Config {
                        name: "LoaderOptions::threads",
                        reason: format!("decode thread {n} could not start: {e}"),
                    });
                }
            }
        }
        Ok(epoch)
    }
}

/// One rank's batches for the rest of an epoch, in step order. Dropping it stops the
/// decode threads and waits for them (each finishes the sample it is on), and gives the
/// buffers back to the loader for the next epoch (a batch still held then follows when
/// it is dropped).
#[derive(Debug)]
pub struct Epoch {
    /// The rank whose share of the epoch this is, for errors.
    rank: usize,
    queue: Arc<Queue>,
    threads: Vec<JoinHandle<()>>,
    next: usize,
    steps: usize,
    skipped: usize,
    sample: [usize; 3],
    timeout: std::time::Duration,
}

impl Epoch {
    /// The next step's batch, `None` after the last. An error names the step's bad sample
    /// (the step is lost; the next call goes on with the next step), or says the threads
    /// gave nothing within the timeout.
    pub fn next_batch(&mut self) -> Result<Option<Batch>> {
        if self.next >= self.steps {
            return Ok(None);
        }
        let step = self.next;
        self.next += 1;
        let buffer = self.queue.take(self.rank, step, self.timeout)?;
        self.skipped += buffer.skipped;
        Ok(Some(Batch {
            buffer: Some(buffer),
            queue: Arc::clone(&self.queue),
            sample: self.sample,
        }))
    }

    /// How many steps this epoch hands over in all.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// How many bad samples were skipped in the batches handed over so far.
    pub fn skipped(&self) -> usize {
        self.skipped
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        self.queue.stop();
        // Each thread finishes the sample it is on. One whose read never returns (a hung
        // network file system) is left to finish on its own after the loader's timeout:
        // the epoch's end, and Python's interpreter, must not wait on it.
        let deadline = Instant::now().checked_add(self.timeout);
        while self.threads.iter().any(|t| !t.is_finished())
            && deadline.is_none_or(|d| Instant::now() < d)
        {
            thread::sleep(STOP_POLL);
        }
        let (done, stuck): (Vec<_>, Vec<_>) = self.threads.drain(..).partition(|t| t.is_finished());
        for thread in done {
            // A panic was already turned into an error or counted in `exited`.
            let _ = thread.join();
        }
        if !stuck.is_empty() {
            tracing::warn!(
                "{} decode thread(s) still on a sample {:?} after the epoch ended (a read \
                 that does not return: a hung network file system?); they are left to \
                 finish on their own, and the next epoch makes new buffers for theirs",
                stuck.len(),
                self.timeout
            );
        }
        self.queue.drain();
    }
}

/// How often a stopping epoch looks whether its decode threads are done.
const STOP_POLL: Duration = Duration::from_millis(1);
