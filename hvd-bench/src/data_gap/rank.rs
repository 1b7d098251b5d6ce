//! One rank of `hvd-bench data-gap`: for each input mode, the loader alone (its
//! capacity), then training steps whose compute is a sleep (a GPU takes no host CPU)
//! and whose gradients go through a real hvd allreduce, timed by hvd::data_stall.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hvd::data::{
    Augment, Batch, ElasticSampler, Epoch, ImageFolder, Loader, LoaderOptions, Source, TuneLimits,
};
use hvd::{Hvd, ReduceOp};

use super::result::{Measured, Mode};
use super::torch::TorchLoader;

/// What every rank of a job runs, the same on all of them.
#[derive(Debug, Clone)]
pub struct Plan {
    pub root: PathBuf,
    /// The Python with torch, or `None` to skip PyTorch's DataLoader.
    pub python: Option<PathBuf>,
    pub batch: usize,
    pub warmup: usize,
    pub steps: usize,
    pub compute: Duration,
    pub gradient_elements: usize,
    /// hvd's loader's decode threads per rank; `None`: the host's cores shared between
    /// its ranks.
    pub threads: Option<usize>,
    /// hvd's decode threads' priority below the loop.
    pub priority: hvd::data::DecodePriority,
    pub workers: usize,
    pub prefetch: usize,
    pub seed: u64,
    pub timeout: Duration,
}

/// The side of the images a batch holds, as ImageNet training crops them.
const SIDE: u32 = 224;

/// Where a mode's batches come from. The batch of the step in progress is held until
/// the next is asked for, as a training loop holds it through its step.
// One feed a mode, never moved while in use: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Feed {
    Synthetic,
    Torch(TorchLoader),
    Hvd {
        loader: Loader,
        sampler: ElasticSampler,
        epoch: Option<Epoch>,
        held: Option<Batch>,
    },
}

impl Feed {
    fn start(&mut self, epoch: u64, rank: usize, size: usize) -> Result<(), String> {
        match self {
            Feed::Synthetic => Ok(()),
            Feed::Torch(torch) => torch.epoch(epoch),
            Feed::Hvd {
                loader,
                sampler,
                epoch: current,
                held,
            } => {
                // The last epoch's threads stop before the next one's start.
                *held = None;
                *current = None;
                sampler.set_epoch(epoch);
                *current = Some(
                    loader
                        .epoch(sampler, rank, size)
                        .map_err(|e| format!("rank {rank}: {e}"))?,
                );
                Ok(())
            }
        }
    }

    /// The next batch's number of images.
    fn next(&mut self, batch: usize, rank: usize) -> Result<usize, String> {
        match self {
            Feed::Synthetic => Ok(batch),
            Feed::Torch(torch) => torch.next_batch(),
            Feed::Hvd { epoch, held, .. } => {
                *held = None;
                let epoch = epoch.as_mut().ok_or("no epoch started")?;
                let next = epoch
                    .next_batch()
                    .map_err(|e| format!("rank {rank}: {e}"))?
                    .ok_or_else(|| format!("rank {rank}: the epoch ended before the benchmark"))?;
                let n = next.len();
                *held = Some(next);
                Ok(n)
            }
        }
    }
}

/// How much longer than asked `thread::sleep` sleeps here (the median of a few
/// tries): the compute's sleep is shortened by it, so a step's compute is what was
/// asked under load as well.
fn sleep_overshoot() -> Duration {
    let asked = Duration::from_millis(2);
    let mut over: Vec<Duration> = (0..15)
        .map(|_| {
            let start = Instant::now();
            std::thread::sleep(asked);
            start.elapsed().saturating_sub(asked)
        })
        .collect();
    over.sort();
    over[over.len() / 2]
}

fn hvd_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Every mode of `plan` on this rank; rank 0's list holds the job's measurements.
///
/// Each mode's loader is measured alone first (its capacity). Then the modes train in
/// [`ROUNDS`] rounds, taking turns, so that load from other work on the host that comes
/// and goes falls on every mode alike, not on whichever ran at the time.
pub fn run(hvd: &Hvd, plan: &Plan) -> Result<Vec<Measured>, String> {
    let (rank, size) = (hvd.rank(), hvd.size());
    let compute = plan.compute.saturating_sub(sleep_overshoot());
    let mut feeds = Vec::new();
    for mode in Mode::ALL {
        let mut feed = match mode {
            Mode::Synthetic => Feed::Synthetic,
            Mode::Torch => match &plan.python {
                Some(python) => Feed::Torch(TorchLoader::start(
                    python,
                    &plan.root,
                    rank,
                    size,
                    plan.batch,
                    plan.workers,
                    plan.prefetch,
                    plan.seed,
                    plan.timeout,
                )?),
                None => continue,
            },
            Mode::Hvd => {
                let source = ImageFolder::open(&plan.root).map_err(hvd_error)?;
                let sampler =
                    ElasticSampler::new(source.len(), plan.batch * size).seed(Some(plan.seed));
                let options = LoaderOptions {
                    threads: plan
                        .threads
                        .unwrap_or_else(|| TuneLimits::host(hvd.local_size()).cores_per_rank())
                        .max(1),
                    prefetch: plan.prefetch,
                    priority: plan.priority,
                    seed: plan.seed,
                    timeout: plan.timeout,
                    ..LoaderOptions::default()
                };
                let loader =
                    Loader::new(source, Augment::train(SIDE), options).map_err(hvd_error)?;
                Feed::Hvd {
                    loader,
                    sampler,
                    epoch: None,
                    held: None,
                }
            }
        };
        let capacity = match mode {
            Mode::Synthetic => None,
            _ => Some(capacity(hvd, plan, &mut feed)?),
        };
        feeds.push((mode, feed, capacity));
    }
    let mut timed: Vec<Timed> = feeds.iter().map(|_| Timed::new(hvd)).collect();
    let mut gradients = vec![1e-3f32; plan.gradient_elements.max(1)];
    let modes = feeds.len();
    for round in 0..ROUNDS {
        let steps = plan.steps / ROUNDS + usize::from(round < plan.steps % ROUNDS);
        // Each round starts with another mode, so what a loader still makes after its
        // own round (PyTorch's workers refilling their queue) falls on each mode alike.
        for turn in 0..modes {
            let which = (round + turn) % modes;
            let (_, feed, _) = &mut feeds[which];
            if round == 0 {
                // A loader starts filling its queue just before its own first steps,
                // not during another mode's.
                feed.start(1, rank, size)?;
            }
            let mut train = Train {
                hvd,
                plan,
                feed,
                compute,
                gradients: &mut gradients,
            };
            train.round(&mut timed[which], steps)?;
        }
    }
    let mut all = Vec::new();
    for ((mode, _, capacity), timed) in feeds.into_iter().zip(timed) {
        all.push(timed.finish(hvd, plan, mode, capacity)?);
    }
    Ok(all)
}

/// Rounds of timed training steps, the modes taking turns.
pub const ROUNDS: usize = 4;

/// Waits for every rank (an allreduce of nothing much), naming what for.
fn together(hvd: &Hvd, what: &str) -> Result<(), String> {
    hvd.allreduce(what, vec![0f32], ReduceOp::Sum)
        .map(drop)
        .map_err(hvd_error)
}

/// The loader alone: every rank drains batches as fast as they come; the job's images
/// over the slowest rank's time.
fn capacity(hvd: &Hvd, plan: &Plan, feed: &mut Feed) -> Result<f64, String> {
    let rank = hvd.rank();
    feed.start(0, rank, hvd.size())?;
    for _ in 0..plan.warmup {
        feed.next(plan.batch, rank)?;
    }
    together(hvd, "bench.data_gap.capacity.start")?;
    let start = Instant::now();
    let mut images = 0;
    for _ in 0..plan.steps {
        images += feed.next(plan.batch, rank)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let images = hvd
        .allreduce(
            "bench.data_gap.capacity.images",
            vec![images as f64],
            ReduceOp::Sum,
        )
        .map_err(hvd_error)?[0];
    let slowest = hvd
        .allreduce(
            "bench.data_gap.capacity.seconds",
            vec![seconds],
            ReduceOp::Max,
        )
        .map_err(hvd_error)?[0];
    Ok(images / slowest)
}

/// One mode's timed steps so far, over every round.
struct Timed {
    clock: hvd::data::StepClock,
    images: usize,
}

impl Timed {
    fn new(hvd: &Hvd) -> Self {
        Timed {
            clock: hvd::data_stall::step_clock(hvd),
            images: 0,
        }
    }

    /// The measurement of `mode`, whose loader alone made `capacity` images a second,
    /// from every round's steps.
    fn finish(
        self,
        hvd: &Hvd,
        plan: &Plan,
        mode: Mode,
        capacity: Option<f64>,
    ) -> Result<Measured, String> {
        let Timed { mut clock, images } = self;
        let size = hvd.size();
        let seconds: f64 = clock.steps().iter().map(|s| s.wall).sum();
        let arrivals: Vec<f64> = clock
            .steps()
            .iter()
            .map(|s| (s.wall - s.comm).max(s.data))
            .collect();
        let report = hvd::data_stall::epoch_report(hvd, &mut clock).map_err(hvd_error)?;
        let images = hvd
            .allreduce("bench.data_gap.images", vec![images as f64], ReduceOp::Sum)
            .map_err(hvd_error)?[0];
        let slowest = hvd
            .allreduce("bench.data_gap.seconds", vec![seconds], ReduceOp::Max)
            .map_err(hvd_error)?[0];
        let arrivals = hvd
            .allgather("bench.data_gap.arrivals", arrivals)
            .map_err(hvd_error)?;
        let unaccounted = report
            .ranks
            .iter()
            .map(|r| {
                if r.wall > 0.0 {
                    (r.unaccounted() / r.wall).abs()
                } else {
                    0.0
                }
            })
            .fold(0.0, f64::max);
        let steps = report.steps.max(1) as f64;
        let comm = report.ranks.iter().map(|r| r.own_comm).sum::<f64>() / size as f64 / steps;
        Ok(Measured {
            np: size,
            mode,
            images_per_s: images / slowest,
            capacity,
            batch: plan.batch,
            data_bound: report.data_bound(),
            unaccounted,
            arrivals,
            comm,
        })
    }
}

/// Training steps of one mode: the batch, the compute (a sleep), the gradients'
/// allreduce.
struct Train<'a> {
    hvd: &'a Hvd,
    plan: &'a Plan,
    feed: &'a mut Feed,
    compute: Duration,
    gradients: &'a mut Vec<f32>,
}

impl Train<'_> {
    /// One step, timed by `clock`.
    fn step(&mut self, clock: &mut hvd::data::StepClock) -> Result<usize, String> {
        let rank = self.hvd.rank();
        let (feed, batch) = (&mut *self.feed, self.plan.batch);
        let gradients = std::mem::take(self.gradients);
        let images = clock.data(|| feed.next(batch, rank))?;
        std::thread::sleep(self.compute);
        *self.gradients = clock.comm(|| {
            self.hvd
                .allreduce("bench.data_gap.gradients", gradients, ReduceOp::Average)
                .map_err(hvd_error)
        })?;
        clock.step();
        Ok(images)
    }

    /// A round: `plan.warmup` steps that drain what the loader made ahead while the
    /// other modes ran, then `steps` timed ones.
    fn round(&mut self, timed: &mut Timed, steps: usize) -> Result<(), String> {
        // The warm-up's steps go on a clock of their own that nobody reads.
        let mut warmup = hvd::data::StepClock::new();
        for _ in 0..self.plan.warmup {
            self.step(&mut warmup)?;
        }
        together(self.hvd, "bench.data_gap.train.round")?;
        timed.clock.restart();
        for _ in 0..steps {
            timed.images += self.step(&mut timed.clock)?;
        }
        Ok(())
    }
}
