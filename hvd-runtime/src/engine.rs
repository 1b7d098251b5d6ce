//! One process set's engine: drain the queue, negotiate, run what every rank is ready
//! for in the agreed order, complete handles. A caller waiting on a handle runs its
//! cycles, or the set's background thread does (see `drive.rs`).
//!
//! Negotiation has no privileged coordinator process: each cycle the ranks AND a small
//! vector (flags plus one bit per response-cache slot); only when some rank has something
//! new to say do they allgather their announcements, and then every rank feeds the same
//! announcements in the same order into its own copy of the message table, so every rank
//! reaches the same responses in the same order, mismatch errors included. Decisions that
//! depend on a clock (stall shutdown) are taken by rank 0 alone and travel in its
//! announcement, so they too are the same everywhere. When the ranks expect a set of
//! small cached allreduces, the round carries their data as well (`speculate.rs`).
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

use rustc_hash::FxHashMap;

use hvd_core::{Collective, DType, Error, ReduceOp, Reduction, Result, TensorMut, allgather_bytes};

use crate::autotune::Params;

use super::cache::ResponseCache;
use super::compress::WireBuffers;
use super::config::Config;
use super::control_errors::while_negotiating;
use super::expectation::Expectation;
use super::queue::{Queue, Submission};
use super::request::{Name, OpKind, Request};
use super::response::Response;
use super::stall::StallInspector;
use super::stats::Stats;
use super::table::MessageTable;
use super::timeline::{FLUSH_EVERY, Trace};
use super::tuning::Tuning;
use super::wire::Announcement;
use super::work::Work;
use crate::stack::Stack;

/// Where a pending tensor is in negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Progress {
    /// Waiting for every rank to set this response-cache slot's bit.
    Cached(usize),
    /// To be announced in the next cycle.
    ToAnnounce,
    /// Announced; waiting in the message table.
    Announced,
}

/// A tensor this rank submitted that has not completed.
pub(super) struct Pending {
    pub request: Request,
    pub work: Work,
    pub progress: Progress,
    /// Local submission order: announcements keep it.
    pub seq: u64,
    pub since: Instant,
}

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
    pub(super) rank: usize,
    pub(super) control: Arc<dyn Collective>,
    pub(super) stack: Stack,
    pub(super) queue: Arc<Queue>,
    pub(super) stats: Arc<Stats>,
    global: bool,
    pub(super) pending: FxHashMap<Name, Pending>,
    /// Wire buffers of compressed allreduces, kept for the next batch.
    pub(super) wire_buffers: WireBuffers,
    table: MessageTable,
    pub(super) cache: ResponseCache,
    /// The cached set the ranks expect next, whose data rides the negotiation round.
    pub(super) expectation: Expectation,
    stall: StallInspector,
    config: Config,
    /// The autotuner (global set only, when `HVD_AUTOTUNE` is on).
    tuning: Option<Tuning>,
    pub(super) trace: Arc<Trace>,
    /// Cycles run; every rank of the set counts the same.
    cycles: u64,
    next_seq: u64,
    leaving: bool,
}

/// Entries of the per-cycle vector before the response-cache bits.
pub(super) const FLAGS: usize = 3;

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
        let topology = control.topology();
        let (rank, size) = (topology.rank(), topology.size());
        parts
            .stats
            .parameters(parts.stack.fusion_threshold(), parts.config.cycle_time);
        Engine {
            rank,
            control,
            stack: parts.stack,
            queue: parts.queue,
            stats: parts.stats,
            global: parts.global,
            pending: FxHashMap::default(),
            wire_buffers: WireBuffers::default(),
            table: MessageTable::new(size),
            cache: ResponseCache::new(parts.config.cache_capacity),
            expectation: Expectation::default(),
            stall: StallInspector::new(rank, parts.config.stall_check, parts.config.stall_shutdown),
            tuning: parts.tuning,
            trace: parts.trace,
            cycles: 0,
            config: parts.config,
            next_seq: 0,
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
        let waiting = self.pending.len();
        self.leaving |= shutdown;
        let next = self.cycle().unwrap_or_else(|e| {
            // Tensors submitted while the failed round was blocked were waiting too.
            let (late, _) = self.queue.take(Duration::ZERO);
            let now = Instant::now();
            late.into_iter().for_each(|s| self.accept(s, now));
            Next::Stop(while_negotiating(e, &self.waiting()))
        });
        // The caller of what just completed is likely to submit again at once.
        (next, took || self.pending.len() < waiting)
    }

    fn accept(&mut self, submission: Submission, now: Instant) {
        let Submission { request, work } = submission;
        self.trace.recorder.queue_begin(&request.name);
        let progress = match self.cache.lookup(self.rank, &request) {
            Some(cache_slot) if !self.anyone_joined() => Progress::Cached(cache_slot),
            _ => Progress::ToAnnounce,
        };
        self.next_seq += 1;
        self.pending.insert(
            request.name.clone(),
            Pending {
                request,
                work,
                progress,
                seq: self.next_seq,
                since: now,
            },
        );
    }

    /// This rank's tensors still waiting, oldest first.
    fn waiting(&self) -> Vec<String> {
        let mut pending: Vec<&Pending> = self.pending.values().collect();
        pending.sort_by_key(|p| p.seq);
        pending.iter().map(|p| p.request.name.to_string()).collect()
    }

    /// The global set's engine gathers the job's trace; the others only record.
    fn gathers_trace(&self) -> bool {
        self.global
    }

    pub(super) fn anyone_joined(&self) -> bool {
        self.table.joined().iter().any(|j| *j)
    }

    /// A cached tensor goes back to announcing when its slot changed hands, when a rank
    /// has joined (joined ranks need the table), or when it waited long enough that the
    /// stall inspector should see who is missing.
    fn refresh_cached(&mut self) {
        let joined = self.anyone_joined();
        let patience = self.stall.cached_patience();
        let now = Instant::now();
        for p in self.pending.values_mut() {
            if let Progress::Cached(slot) = p.progress
                && (joined
                    || !self.cache.holds(slot, &p.request.name)
                    || now.saturating_duration_since(p.since) >= patience)
            {
                p.progress = Progress::ToAnnounce;
            }
        }
    }

    fn announcement(&mut self) -> Announcement {
        let mut fresh: Vec<&mut Pending> = self
            .pending
            .values_mut()
            .filter(|p| p.progress == Progress::ToAnnounce)
            .collect();
        fresh.sort_by_key(|p| p.seq);
        let requests = fresh
            .into_iter()
            .map(|p| {
                p.progress = Progress::Announced;
                p.request.clone()
            })
            .collect();
        Announcement {
            requests,
            leaving: self.leaving.then(|| {
                format!(
                    "rank {} shut down (its hvd was dropped or shutdown() was called)",
                    self.rank
                )
            }),
            stalled: self.stall.verdicts(&self.table),
            tune: self
                .tuning
                .as_mut()
                .and_then(Tuning::take_decision)
                .or_else(|| self.follow_job()),
        }
    }

    /// On a process set's rank 0: the job's new fusion threshold, for the set's members
    /// to apply after the same cycle of the set (each set runs its own cycles, so a
    /// change cannot reach them all at once from the outside).
    fn follow_job(&self) -> Option<Params> {
        if self.rank != 0 {
            return None;
        }
        self.stack
            .followed_threshold()
            .map(|fusion_threshold| Params {
                fusion_threshold,
                cycle_time: self.config.cycle_time,
            })
    }

    /// One negotiation round and the work it makes ready.
    fn cycle(&mut self) -> Result<Next> {
        self.stats.cycle();
        self.cycles += 1;
        self.trace.recorder.mark_cycle();
        self.refresh_cached();
        let announcement = self.announcement();
        let mut flags = self.flags(&announcement);
        let (mut hits, rode): (Vec<usize>, Vec<Response>) =
            self.negotiate(&mut flags)?.into_iter().unzip();
        let mut responses: Vec<Response> = Vec::new();
        for slot in (FLAGS..flags.len())
            .filter(|i| flags[*i] != 0)
            .map(|i| i - FLAGS)
        {
            if let Some(response) = self.cache.hit(slot) {
                self.stats.cache_hit();
                responses.push(response);
                hits.push(slot);
            }
        }
        self.expectation.observe(hits);
        let mut leavers = Vec::new();
        let mut tune = None;
        if flags[0] == 0 || flags[1] == 0 {
            self.stats.announce_round();
            (leavers, tune) = self.announce_round(&announcement, &mut responses)?;
        }
        self.stall.warn(&self.table);
        if let Some(tuning) = self.tuning.as_mut() {
            tuning.observe(&rode);
            tuning.observe(&responses);
        }
        self.execute(responses)?;
        if let Some(params) = tune {
            self.apply(params);
        }
        let trace_events = flags[2] == 0;
        let last = !leavers.is_empty();
        let flush_point = last || self.cycles.is_multiple_of(FLUSH_EVERY);
        if self.gathers_trace() && flush_point {
            if trace_events {
                self.trace.gather(self.control.as_ref())?;
            }
            self.trace.passed_flush_point();
        }
        if last {
            Ok(Next::Stop(Error::Shutdown {
                cause: leavers.join("; "),
            }))
        } else {
            Ok(Next::Continue)
        }
    }

    /// ANDs `flags` across the ranks: the negotiation round when nothing rides it.
    pub(super) fn and_flags(&self, flags: &mut [u8]) -> Result<()> {
        let len = flags.len();
        self.control.allreduce(
            &mut [TensorMut::from_bytes(
                "hvd.negotiate",
                DType::Bool,
                vec![len],
                flags,
            )?],
            Reduction::new(ReduceOp::Min),
        )
    }

    /// The vector the ranks AND: `[nothing to announce, not leaving, no trace events,
    /// cache bits...]`.
    fn flags(&self, announcement: &Announcement) -> Vec<u8> {
        let mut flags = vec![0u8; FLAGS + self.cache.slots()];
        flags[0] = (announcement.requests.is_empty()
            && announcement.stalled.is_empty()
            && announcement.tune.is_none()) as u8;
        flags[1] = announcement.leaving.is_none() as u8;
        flags[2] = !self.trace.has_events() as u8;
        let joined = self.table.joined().get(self.rank).copied().unwrap_or(false);
        for p in self.pending.values() {
            if let Progress::Cached(slot) = p.progress {
                flags[FLAGS + slot] = 1;
            }
        }
        if joined {
            // A joined rank takes part in every cached allreduce with zeros.
            for slot in 0..self.cache.slots() {
                if self.cache.kind(slot) == Some(OpKind::ALLREDUCE) {
                    flags[FLAGS + slot] = 1;
                }
            }
        }
        flags
    }

    /// Allgathers every rank's announcement and turns what became ready into responses.
    /// Returns the reasons of ranks that are leaving, and rank 0's new tuning.
    fn announce_round(
        &mut self,
        mine: &Announcement,
        responses: &mut Vec<Response>,
    ) -> Result<(Vec<String>, Option<Params>)> {
        let all = allgather_bytes(self.control.as_ref(), "hvd.announce", &mine.encode())?;
        let mut leavers = Vec::new();
        let mut tune = None;
        for (from, bytes) in all.iter().enumerate() {
            let announcement = Announcement::decode(bytes, from, self.rank)?;
            for request in announcement.requests {
                // A rank announcing a cached name asked for it differently (or waited
                // too long): the cached response is stale on every rank.
                self.cache.invalidate(&request.name);
                let recorder = &self.trace.recorder;
                recorder.negotiate_begin(&request.name, request.kind().name());
                recorder.negotiate_rank_ready(&request.name, from);
                self.table.add(from, request);
            }
            leavers.extend(announcement.leaving);
            if from == 0 {
                for verdict in announcement.stalled {
                    responses.extend(self.stall.fail(&mut self.table, &verdict));
                }
                tune = announcement.tune;
            }
        }
        for ready in self.table.take_ready() {
            self.trace.recorder.negotiate_end(&ready.response.name);
            self.cache.insert(&ready.response, &ready.requests);
            responses.push(ready.response);
        }
        Ok((leavers, tune))
    }

    /// Applies the autotuner's parameters (every rank, after the same cycle).
    fn apply(&mut self, params: Params) {
        tracing::debug!(
            fusion_threshold = params.fusion_threshold,
            cycle_time = ?params.cycle_time,
            "autotune: new parameters"
        );
        self.config.cycle_time = params.cycle_time;
        self.stack.set_fusion_threshold(params.fusion_threshold);
        self.stats
            .parameters(params.fusion_threshold, params.cycle_time);
    }

    /// Fails everything still pending or queued with `reason`.
    fn stop(&mut self, reason: Error) {
        let queued = self.queue.stop(reason.clone());
        for submission in queued {
            submission.work.fail(reason.clone());
        }
        for (_, p) in self.pending.drain() {
            p.work.fail(reason.clone());
        }
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
