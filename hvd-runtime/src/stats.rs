//! Counters that show what a process set's engine does.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one process set's engine.
#[derive(Debug, Default)]
pub struct Stats {
    cycles: AtomicU64,
    caller_cycles: AtomicU64,
    announce_rounds: AtomicU64,
    cache_hits: AtomicU64,
    speculated: AtomicU64,
    completed: AtomicU64,
    fusion_threshold: AtomicU64,
    cycle_time_us: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    /// Negotiation cycles run.
    pub cycles: u64,
    /// Of those, cycles run by a caller waiting on its handle rather than by the
    /// background thread (no hand-off between threads on the way in or out).
    pub caller_cycles: u64,
    /// Cycles that needed the announcement round (some rank had a tensor the response
    /// cache did not cover); the others took the cache's fast path.
    pub announce_rounds: u64,
    /// Tensors that ran straight from the response cache.
    pub cache_hits: u64,
    /// Of those, tensors whose data travelled in the negotiation round itself (small
    /// allreduces of a set that repeats; see the runtime's crate docs).
    pub speculated: u64,
    /// Operations completed (successfully or not).
    pub completed: u64,
    /// The fusion threshold in effect (the autotuner changes it).
    pub fusion_threshold: u64,
    /// The cycle time in effect, in microseconds.
    pub cycle_time_us: u64,
}

impl Stats {
    pub(crate) fn cycle(&self) {
        self.cycles.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn caller_cycle(&self) {
        self.caller_cycles.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn announce_round(&self) {
        self.announce_rounds.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn cache_hit(&self) {
        self.cache_hits.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn speculated(&self) {
        self.speculated.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn completed(&self, operations: u64) {
        self.completed.fetch_add(operations, Ordering::Relaxed);
    }

    pub(crate) fn parameters(&self, fusion_threshold: usize, cycle_time: std::time::Duration) {
        self.fusion_threshold
            .store(fusion_threshold as u64, Ordering::Relaxed);
        self.cycle_time_us
            .store(cycle_time.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            cycles: self.cycles.load(Ordering::Relaxed),
            caller_cycles: self.caller_cycles.load(Ordering::Relaxed),
            announce_rounds: self.announce_rounds.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            speculated: self.speculated.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            fusion_threshold: self.fusion_threshold.load(Ordering::Relaxed),
            cycle_time_us: self.cycle_time_us.load(Ordering::Relaxed),
        }
    }
}
