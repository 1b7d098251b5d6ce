//! The runtime's side of the Timeline: where the trace goes, when it is gathered.
//!
//! Every rank records into its own [`Recorder`]; rank 0 owns the [`TraceFile`]. The
//! global set's engine gathers every rank's events to rank 0 every [`FLUSH_EVERY`]
//! cycles, but only when some rank has events (a flag in the vector the ranks AND each
//! cycle), and once more when the job ends, so an idle or untraced job pays nothing.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use hvd_core::{Collective, Result};
use hvd_timeline::{Recorder, TraceFile, align_clocks, flush};

/// Cycles between two gatherings of the trace.
pub(crate) const FLUSH_EVERY: u64 = 64;

/// Barrier rounds used to align the ranks' clocks at start. The error bound is set by the
/// tightest round, and on oversubscribed cores most rounds are loose: 50 rounds (about a
/// millisecond) bring it from ~500 µs with 10 rounds to ~5 µs at 2 processes and ~50 µs at
/// 4 processes on 2 cores.
const ALIGNMENT_ROUNDS: usize = 50;

/// The trace of this process: its recorder and, on rank 0, the file.
#[derive(Default)]
pub(crate) struct Trace {
    pub recorder: Arc<Recorder>,
    file: Mutex<Option<TraceFile>>,
    /// How many gathering points (every [`FLUSH_EVERY`] cycles) the global engine has
    /// passed, gathered or not: a caller of [`stop`](Self::stop) waits for the next ones.
    flush_points: Mutex<u64>,
    flush_passed: Condvar,
}

impl Trace {
    fn file(&self) -> MutexGuard<'_, Option<TraceFile>> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts recording; on rank 0, into a new file at `path`.
    pub fn start(&self, rank: usize, path: &Path) -> Result<()> {
        if rank == 0 {
            *self.file() = Some(TraceFile::create(path)?);
        }
        self.recorder.start();
        Ok(())
    }

    /// Stops recording, if it was, then waits, at most `wait`, until what was recorded
    /// has reached rank 0's file: until the global engine has passed two more gathering points (the
    /// first may have begun before the stop). False when the wait ran out (the engine
    /// stopped, or cycles are slow).
    pub fn stop(&self, wait: Duration) -> bool {
        if !self.recorder.is_started() {
            return true;
        }
        let start = *self.points();
        self.recorder.stop();
        let points = self.points();
        let (points, timeout) = self
            .flush_passed
            .wait_timeout_while(points, wait, |passed| *passed < start + 2)
            .unwrap_or_else(|e| e.into_inner());
        drop(points);
        !timeout.timed_out()
    }

    fn points(&self) -> MutexGuard<'_, u64> {
        self.flush_points.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The global engine passed a gathering point (it gathered, if any rank had events).
    pub fn passed_flush_point(&self) {
        *self.points() += 1;
        self.flush_passed.notify_all();
    }

    /// Measures this rank's clock against rank 0's (collective over `group`), so that
    /// rank 0's file shows every rank on one time axis.
    pub fn align(&self, group: &dyn Collective) -> Result<()> {
        let alignment = align_clocks(group, ALIGNMENT_ROUNDS)?;
        tracing::debug!(
            max_error_us = alignment.max_error_ns() as f64 / 1e3,
            "timeline clocks aligned"
        );
        self.recorder.set_clock_offset(alignment.local());
        Ok(())
    }

    /// Whether this rank has events to gather.
    pub fn has_events(&self) -> bool {
        self.recorder.pending() > 0
    }

    /// Gathers every rank's events into rank 0's file (collective over `group`).
    pub fn gather(&self, group: &dyn Collective) -> Result<()> {
        let mut file = self.file();
        flush(&self.recorder, group, file.as_mut())
    }
}
