//! Negotiation: this rank's requests go in, and out come the responses every rank agreed
//! on, the same everywhere and in the same order. It holds no tensor and completes
//! nothing; the executor does both.
//!
//! There is no privileged coordinator process: each cycle the ranks AND a small vector
//! (flags plus one bit per response-cache slot); only when some rank has something new
//! to say do they allgather their announcements, and then every rank feeds the same
//! announcements in the same order into its own copy of the message table, so every rank
//! reaches the same responses in the same order, mismatch errors included. Decisions that
//! depend on a clock (stall shutdown) are taken by rank 0 alone and travel in its
//! announcement, so they too are the same everywhere.
//!
//! One cycle is one [`Round`], in three steps:
//! - [`open`](Negotiation::open) decides what this rank says, without communicating;
//! - [`exchange`](Negotiation::exchange) ANDs the vector; when the ranks expect a set of
//!   small cached allreduces, the round also carries their data (`speculate.rs`), which
//!   the executor loads into the round's [`Cargo`] before and completes after;
//! - [`conclude`](Negotiation::conclude) takes the cache hits and, when some rank has
//!   news, runs the announcement round, and returns the [`Agreement`].

use std::sync::Arc;
use std::time::Instant;

use rustc_hash::FxHashMap;

use hvd_core::{Collective, DType, ReduceOp, Reduction, Result, TensorMut, allgather_bytes};
use hvd_timeline::Recorder;

use super::cache::ResponseCache;
use super::expectation::Expectation;
use super::request::{Name, OpKind, Request};
use super::response::Response;
use super::speculate::{self, Cargo};
use super::stall::StallInspector;
use super::stats::Stats;
use super::table::MessageTable;
use super::wire::Announcement;
use crate::autotune::Params;

/// Entries of the per-cycle vector before the response-cache bits.
const FLAGS: usize = 3;

/// Where a request is in negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Waiting for every rank to set this response-cache slot's bit.
    Cached(usize),
    /// To be announced in the next round.
    ToAnnounce,
    /// Announced; waiting in the message table.
    Announced,
}

/// A request of this rank that no response has answered yet.
struct Waiting {
    request: Request,
    progress: Progress,
    /// Local submission order: announcements keep it.
    seq: u64,
    since: Instant,
}

/// What negotiation is built from.
pub(crate) struct Setup {
    /// The bare transport the rounds run on.
    pub control: Arc<dyn Collective>,
    pub stats: Arc<Stats>,
    /// Where the tensors' negotiation spans go.
    pub recorder: Arc<Recorder>,
    pub cache_capacity: usize,
    pub stall_check: Option<std::time::Duration>,
    pub stall_shutdown: Option<std::time::Duration>,
}

/// One process set's negotiation on this rank.
pub(crate) struct Negotiation {
    rank: usize,
    ranks: usize,
    control: Arc<dyn Collective>,
    stats: Arc<Stats>,
    recorder: Arc<Recorder>,
    waiting: FxHashMap<Name, Waiting>,
    table: MessageTable,
    cache: ResponseCache,
    /// The cached set the ranks expect next, whose data rides the round.
    expectation: Expectation,
    stall: StallInspector,
    next_seq: u64,
}

/// This rank's side of one round: opened, exchanged, then concluded.
pub(crate) struct Round {
    announcement: Announcement,
    /// `[nothing to announce, not leaving, no trace events, cache bits...]`, this rank's
    /// until the exchange, everyone's after.
    flags: Vec<u8>,
    /// The data of the cached allreduces the ranks expect, when they ride this round.
    cargo: Option<Cargo>,
    /// The cache slots that ran this round.
    hits: Vec<usize>,
}

impl Round {
    /// The speculated data, for the executor to load before the exchange.
    pub fn cargo(&mut self) -> Option<&mut Cargo> {
        self.cargo.as_mut()
    }

    /// The speculated data after the exchange, for the executor to complete.
    pub fn take_cargo(&mut self) -> Option<Cargo> {
        self.cargo.take()
    }
}

/// What a round agreed.
pub(crate) struct Agreement {
    /// What to run, in the agreed order: plans or errors every rank reports.
    pub responses: Vec<Response>,
    /// Why ranks are leaving the job: the engine stops after this cycle when any are.
    pub leavers: Vec<String>,
    /// Rank 0's new parameters, applied by every rank after this cycle.
    pub tune: Option<Params>,
    /// Whether some rank has Timeline events to gather.
    pub trace_events: bool,
}

impl Negotiation {
    pub fn new(setup: Setup) -> Negotiation {
        let topology = setup.control.topology();
        let (rank, ranks) = (topology.rank(), topology.size());
        Negotiation {
            rank,
            ranks,
            control: setup.control,
            stats: setup.stats,
            recorder: setup.recorder,
            waiting: FxHashMap::default(),
            table: MessageTable::new(ranks),
            cache: ResponseCache::new(setup.cache_capacity),
            expectation: Expectation::default(),
            stall: StallInspector::new(rank, setup.stall_check, setup.stall_shutdown),
            next_seq: 0,
        }
    }

    /// Takes a request this rank submitted at `now`.
    pub fn accept(&mut self, request: Request, now: Instant) {
        let progress = match self.cache.lookup(self.rank, &request) {
            Some(cache_slot) if !self.anyone_joined() => Progress::Cached(cache_slot),
            _ => Progress::ToAnnounce,
        };
        self.next_seq += 1;
        self.waiting.insert(
            request.name.clone(),
            Waiting {
                request,
                progress,
                seq: self.next_seq,
                since: now,
            },
        );
    }

    /// How many of this rank's requests no response has answered yet.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// This rank's requests still waiting, oldest first.
    pub fn waiting_names(&self) -> Vec<String> {
        let mut waiting: Vec<&Waiting> = self.waiting.values().collect();
        waiting.sort_by_key(|w| w.seq);
        waiting.iter().map(|w| w.request.name.to_string()).collect()
    }

    fn anyone_joined(&self) -> bool {
        self.table.joined().iter().any(|j| *j)
    }

    /// Opens this cycle's round: what this rank announces (its new requests, whether it
    /// is `leaving`, rank 0's stall verdicts, and `tune`, rank 0's new parameters) and
    /// the vector it ANDs (`trace_events`: whether it has Timeline events to gather).
    pub fn open(&mut self, leaving: bool, trace_events: bool, tune: Option<Params>) -> Round {
        self.refresh_cached();
        let announcement = self.announcement(leaving, tune);
        let flags = self.flags(&announcement, trace_events);
        let cargo = self.cargo();
        Round {
            announcement,
            flags,
            cargo,
            hits: Vec::new(),
        }
    }

    /// A cached request goes back to announcing when its slot changed hands, when a rank
    /// has joined (joined ranks need the table), or when it waited long enough that the
    /// stall inspector should see who is missing.
    fn refresh_cached(&mut self) {
        let joined = self.anyone_joined();
        let patience = self.stall.cached_patience();
        let now = Instant::now();
        for w in self.waiting.values_mut() {
            if let Progress::Cached(slot) = w.progress
                && (joined
                    || !self.cache.holds(slot, &w.request.name)
                    || now.saturating_duration_since(w.since) >= patience)
            {
                w.progress = Progress::ToAnnounce;
            }
        }
    }

    fn announcement(&mut self, leaving: bool, tune: Option<Params>) -> Announcement {
        let mut fresh: Vec<&mut Waiting> = self
            .waiting
            .values_mut()
            .filter(|w| w.progress == Progress::ToAnnounce)
            .collect();
        fresh.sort_by_key(|w| w.seq);
        let requests = fresh
            .into_iter()
            .map(|w| {
                w.progress = Progress::Announced;
                w.request.clone()
            })
            .collect();
        Announcement {
            requests,
            leaving: leaving.then(|| {
                format!(
                    "rank {} shut down (its hvd was dropped or shutdown() was called)",
                    self.rank
                )
            }),
            stalled: self.stall.verdicts(&self.table),
            tune,
        }
    }

    /// The vector the ranks AND: `[nothing to announce, not leaving, no trace events,
    /// cache bits...]`.
    fn flags(&self, announcement: &Announcement, trace_events: bool) -> Vec<u8> {
        let mut flags = vec![0u8; FLAGS + self.cache.slots()];
        flags[0] = (announcement.requests.is_empty()
            && announcement.stalled.is_empty()
            && announcement.tune.is_none()) as u8;
        flags[1] = announcement.leaving.is_none() as u8;
        flags[2] = !trace_events as u8;
        let joined = self.table.joined().get(self.rank).copied().unwrap_or(false);
        for w in self.waiting.values() {
            if let Progress::Cached(slot) = w.progress {
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

    /// The data of the expected cached allreduces, zeroed, when this round speculates.
    fn cargo(&self) -> Option<Cargo> {
        let slots = self.expectation.expected()?;
        if self.anyone_joined() {
            return None;
        }
        let riders = speculate::layout(slots, &self.cache)?;
        let all_waiting = riders.iter().all(|r| {
            self.waiting
                .get(&r.name)
                .is_some_and(|w| w.progress == Progress::Cached(r.slot))
        });
        Some(Cargo::new(riders, all_waiting))
    }

    /// The round's collective: ANDs the flags across the ranks and, when the round
    /// speculates, sums the cargo's data. Returns the cached responses of the tensors
    /// whose data landed (the cargo says so; the executor completes them).
    pub fn exchange(&mut self, round: &mut Round) -> Result<Vec<Response>> {
        let Some(cargo) = round.cargo.as_mut() else {
            self.and_flags(&mut round.flags)?;
            return Ok(Vec::new());
        };
        let mut counts: Vec<i32> = round.flags.iter().map(|&f| i32::from(f)).collect();
        counts.push(i32::from(cargo.ready));
        speculate::round_trip(self.control.as_ref(), &mut counts, cargo)?;
        let ranks = self.ranks;
        let everyone = |count: &i32| usize::try_from(*count) == Ok(ranks);
        for (flag, count) in round.flags.iter_mut().zip(&counts) {
            *flag = u8::from(everyone(count));
        }
        if !counts.last().is_some_and(everyone) {
            self.expectation.missed(cargo.data.len());
            return Ok(Vec::new());
        }
        cargo.landed = true;
        let mut rode = Vec::with_capacity(cargo.riders.len());
        for r in &cargo.riders {
            round.flags[FLAGS + r.slot] = 0;
            if let Some(response) = self.cache.hit(r.slot) {
                rode.push(response);
                round.hits.push(r.slot);
            }
            self.stats.cache_hit();
            self.waiting.remove(&r.name);
        }
        Ok(rode)
    }

    /// ANDs `flags` across the ranks: the round when nothing rides it.
    fn and_flags(&self, flags: &mut [u8]) -> Result<()> {
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

    /// Ends the round: the cached responses every rank asked for, then, when some rank
    /// has news, the announcement round's.
    pub fn conclude(&mut self, round: Round) -> Result<Agreement> {
        let Round {
            announcement,
            flags,
            mut hits,
            ..
        } = round;
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
        for response in &responses {
            self.waiting.remove(&response.name);
        }
        Ok(Agreement {
            responses,
            leavers,
            tune,
            trace_events: flags[2] == 0,
        })
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
                self.recorder
                    .negotiate_begin(&request.name, request.kind().name());
                self.recorder.negotiate_rank_ready(&request.name, from);
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
            self.recorder.negotiate_end(&ready.response.name);
            self.cache.insert(&ready.response, &ready.requests);
            responses.push(ready.response);
        }
        Ok((leavers, tune))
    }
}

#[cfg(test)]
mod tests;
