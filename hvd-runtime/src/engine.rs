//! One process set's engine: drain the queue, negotiate, run what every rank is ready
//! for in the agreed order. A caller waiting on a handle runs its cycles, or the set's
//! background thread does (see `drive.rs`).
//!
//! The engine only sequences a cycle: [`Negotiation`] turns requests into the responses
//! every rank agreed on, and the [`Executor`] holds this rank's work, runs the responses
//! and completes every operation (the small cached allreduces that ride the negotiation
//! round included). Around them it keeps what spans cycles: the autotuner, and the
//! global set's gathering of the Timeline.
//!
//! Latency policy: a caller that waits on its handle runs the cycle itself, so a
//! blocking collective crosses no thread at all. Otherwise the background thread sleeps
//! at most one cycle time when idle, but a submission wakes it at once, so a lone small
//! tensor never waits out a cycle; after a cycle of its own that had work it polls the
//! queue for a moment before it sleeps, and callers poll their handles before they sleep
//! (see `poll.rs`). Under load, tensors submitted while a cycle runs are batched into the
//! next one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd_core::{Collective, Error, Result};

use super::config::Config;
use super::control_errors::while_negotiating;
use super::executor::Executor;
use super::negotiation::{self, Negotiation};
use super::queue::{Queue, Submission};
use super::stats::Stats;
use super::timeline::{FLUSH_EVERY, Trace};
use super::tuning::Tuning;
use crate::autotune::Params;
use crate::stack::Stack;

/// Everything an engine is built from.
pub(crate) struct EngineParts {
    /// The middleware stack for the data; negotiation runs on its bare transport.
    pub stack: Stack,
    pub queue: Arc<Queue>,
    pub config: Config,
    pub stats: Arc<Stats>,
    /// Whether this is the global set's engine, which gathers the job's trace.
    pub global: bool,
    /// Present on the global set's engine when autotuning.
    pub tuning: Option<Tuning>,
    /// The trace this engine records into; the global set's engine also gathers it.
    pub trace: Arc<Trace>,
}

pub(crate) struct Engine {
    rank: usize,
    /// The bare transport: the Timeline's clock alignment and gathering run on it.
    control: Arc<dyn Collective>,
    queue: Arc<Queue>,
    stats: Arc<Stats>,
    global: bool,
    negotiation: Negotiation,
    executor: Executor,
    config: Config,
    /// The autotuner (global set only, when `HVD_AUTOTUNE` is on).
    tuning: Option<Tuning>,
    trace: Arc<Trace>,
    /// Cycles run; every rank of the set counts the same.
    cycles: u64,
    leaving: bool,
}

/// Which thread steps the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum By {
    /// A caller waiting on a handle.
    Caller,
    /// The set's background thread, after it waited for work and let a burst of
    /// submissions settle.
    Background,
}

/// What a cycle decided about the engine's future.
enum Next {
    Continue,
    Stop(Error),
}

impl Engine {
    pub fn new(parts: EngineParts) -> Engine {
        let control = parts.stack.transport().clone();
        let rank = control.topology().rank();
        parts
            .stats
            .parameters(parts.stack.fusion_threshold(), parts.config.cycle_time);
        let recorder = parts.trace.recorder.clone();
        let negotiation = Negotiation::new(negotiation::Setup {
            control: control.clone(),
            stats: parts.stats.clone(),
            recorder: recorder.clone(),
            cache_capacity: parts.config.cache_capacity,
            stall_check: parts.config.stall_check,
            stall_shutdown: parts.config.stall_shutdown,
        });
        let executor = Executor::new(
            parts.stack,
            parts.queue.clone(),
            parts.stats.clone(),
            recorder,
        );
        Engine {
            rank,
            control,
            queue: parts.queue,
            stats: parts.stats,
            global: parts.global,
            negotiation,
            executor,
            tuning: parts.tuning,
            trace: parts.trace,
            cycles: 0,
            config: parts.config,
            leaving: false,
        }
    }

    /// What comes before the first cycle: the global set aligns the job's clocks for the
    /// trace. On failure everything submitted fails and the engine must not step.
    pub fn start(&mut self) -> Result<()> {
        if self.gathers_trace()
            && let Err(e) = self.trace.align(self.control.as_ref())
        {
            self.stop(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Takes what was submitted and runs one cycle, stepped `by` a caller or the
    /// background thread (see [`By`]); `busy` says the last cycle had work. Returns
    /// whether the next step should poll rather than sleep, or `None` once the engine has
    /// stopped and failed whatever was left.
    pub fn step(&mut self, by: By, busy: bool) -> Option<bool> {
        // A panic (a bug, here or in a transport or a caller's buffer) must not leave
        // callers waiting forever: it fails everything, naming this rank.
        let step =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.cycle_once(by, busy)));
        let reason = match step {
            Ok((Next::Continue, busy)) => return Some(busy),
            Ok((Next::Stop(reason), _)) => reason,
            Err(panic) => {
                let reason = Error::Shutdown {
                    cause: format!(
                        "rank {}: hvd's engine failed: {}",
                        self.rank,
                        panic_message(panic.as_ref())
                    ),
                };
                tracing::error!("{reason}");
                reason
            }
        };
        self.stop(reason);
        None
    }

    /// The longest an idle engine waits before it runs a cycle the other ranks may need.
    pub fn cycle_time(&self) -> Duration {
        self.config.cycle_time
    }

    fn cycle_once(&mut self, by: By, busy: bool) -> (Next, bool) {
        if by == By::Caller {
            self.stats.caller_cycle();
        }
        let wait = match by {
            // A caller is not about to submit more; blocked in the next negotiation, it is
            // there the moment the other ranks come. An idle one keeps the cycle time.
            By::Caller if !busy => self.config.cycle_time,
            // The background thread has waited already, and let a burst settle.
            By::Caller | By::Background => Duration::ZERO,
        };
        let (submissions, shutdown) = self.queue.take(wait);
        let took = !submissions.is_empty();
        // One clock reading for the batch: the stall inspector's patience is in seconds.
        let now = Instant::now();
        submissions.into_iter().for_each(|s| self.accept(s, now));
        let waiting = self.negotiation.waiting();
        self.leaving |= shutdown;
        let next = self.cycle().unwrap_or_else(|e| {
            // Tensors submitted while the failed round was blocked were waiting too.
            let (late, _) = self.queue.take(Duration::ZERO);
            let now = Instant::now();
            late.into_iter().for_each(|s| self.accept(s, now));
            Next::Stop(while_negotiating(e, &self.negotiation.waiting_names()))
        });
        // The caller of what just completed is likely to submit again at once.
        (next, took || self.negotiation.waiting() < waiting)
    }

    fn accept(&mut self, submission: Submission, now: Instant) {
        let Submission { request, work } = submission;
        self.executor.hold(request.name.clone(), work);
        self.negotiation.accept(request, now);
    }

    /// The global set's engine gathers the job's trace; the others only record.
    fn gathers_trace(&self) -> bool {
        self.global
    }

    /// On a process set's rank 0: the job's new fusion threshold, for the set's members
    /// to apply after the same cycle of the set (each set runs its own cycles, so a
    /// change cannot reach them all at once from the outside).
    fn follow_job(&self) -> Option<Params> {
        if self.rank != 0 {
            return None;
        }
        self.executor
            .stack()
            .followed_threshold()
            .map(|fusion_threshold| Params {
                fusion_threshold,
                cycle_time: self.config.cycle_time,
            })
    }

    /// One negotiation round and the work it makes ready: the executor loads the data
    /// that rides the round, completes it once it landed, then runs what was agreed.
    fn cycle(&mut self) -> Result<Next> {
        self.stats.cycle();
        self.cycles += 1;
        self.trace.recorder.mark_cycle();
        let tune = self
            .tuning
            .as_mut()
            .and_then(Tuning::take_decision)
            .or_else(|| self.follow_job());
        let mut round = self
            .negotiation
            .open(self.leaving, self.trace.has_events(), tune);
        if let Some(cargo) = round.cargo() {
            self.executor.load(cargo);
        }
        let rode = self.negotiation.exchange(&mut round);
        if let Some(cargo) = round.take_cargo() {
            self.executor.unload(cargo);
        }
        let rode = rode?;
        let agreement = self.negotiation.conclude(round)?;
        if let Some(tuning) = self.tuning.as_mut() {
            tuning.observe(&rode);
            tuning.observe(&agreement.responses);
        }
        self.executor.execute(agreement.responses)?;
        if let Some(params) = agreement.tune {
            self.apply(params);
        }
        let last = !agreement.leavers.is_empty();
        let flush_point = last || self.cycles.is_multiple_of(FLUSH_EVERY);
        if self.gathers_trace() && flush_point {
            if agreement.trace_events {
                self.trace.gather(self.control.as_ref())?;
            }
            self.trace.passed_flush_point();
        }
        if last {
            Ok(Next::Stop(Error::Shutdown {
                cause: agreement.leavers.join("; "),
            }))
        } else {
            Ok(Next::Continue)
        }
    }

    /// Applies the autotuner's parameters (every rank, after the same cycle).
    fn apply(&mut self, params: Params) {
        tracing::debug!(
            fusion_threshold = params.fusion_threshold,
            cycle_time = ?params.cycle_time,
            "autotune: new parameters"
        );
        self.config.cycle_time = params.cycle_time;
        self.executor
            .stack()
            .set_fusion_threshold(params.fusion_threshold);
        self.stats
            .parameters(params.fusion_threshold, params.cycle_time);
    }

    /// Fails everything still pending or queued with `reason`.
    fn stop(&mut self, reason: Error) {
        self.executor.stop(reason);
    }
}

/// What a panic said, for the error that reports it.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
