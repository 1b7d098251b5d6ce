//! Driving the autotuner from the engine: rank 0 measures allreduce throughput per
//! training step and feeds the [`Tuner`]; its decisions travel in rank 0's announcement
//! and every rank applies them after the same cycle.
//!
//! A training step is recognised the way Horovod does it: it ends when a tensor name
//! comes back (the next step's gradients reuse the names).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use hvd_core::Result;

use super::config::Config;
use super::request::{Name, OpKind};
use super::response::Response;
use crate::autotune::{Params, Tuner, TunerConfig};

pub(crate) struct Tuning {
    tuner: Tuner,
    log: Option<PathBuf>,
    steps_per_sample: usize,
    /// Names seen in the current step.
    seen: HashSet<Name>,
    steps: usize,
    bytes: u64,
    started: Option<Instant>,
    decision: Option<Params>,
    logged_points: usize,
    done: bool,
}

impl Tuning {
    /// The tuner of rank 0 when `HVD_AUTOTUNE` is on; `None` otherwise (other ranks only
    /// apply what rank 0 decides).
    pub fn new(rank: usize, config: &Config) -> Result<Option<Tuning>> {
        if !config.autotune || rank != 0 {
            return Ok(None);
        }
        let start = Params {
            fusion_threshold: config.fusion_threshold,
            cycle_time: config.cycle_time,
        };
        let tuner = Tuner::new(TunerConfig::new(start.clamped()))?;
        let first = tuner.current();
        Ok(Some(Tuning {
            tuner,
            log: config.autotune_log.clone(),
            steps_per_sample: config.autotune_steps_per_sample.max(1),
            seen: HashSet::new(),
            steps: 0,
            bytes: 0,
            started: None,
            // The start point may have been clamped into the searched range.
            decision: (first != start).then_some(first),
            logged_points: 0,
            done: false,
        }))
    }

    /// Counts the allreduced bytes of a cycle's responses, ending samples at step
    /// boundaries.
    pub fn observe(&mut self, responses: &[Response]) {
        if self.done {
            return;
        }
        for response in responses {
            let Ok(plan) = &response.outcome else {
                continue;
            };
            if response.kind != OpKind::ALLREDUCE {
                continue;
            }
            if self.seen.contains(&response.name) {
                self.end_step();
            }
            self.seen.insert(response.name.clone());
            self.started.get_or_insert_with(Instant::now);
            self.bytes += (plan.shape.iter().product::<usize>() * plan.dtype.size()) as u64;
        }
    }

    fn end_step(&mut self) {
        self.seen.clear();
        self.steps += 1;
        if self.steps < self.steps_per_sample {
            return;
        }
        let elapsed = self.started.map(|s| s.elapsed()).unwrap_or_default();
        if let Some(params) = self.tuner.record(self.bytes, elapsed) {
            self.decision = Some(params);
        }
        self.steps = 0;
        self.bytes = 0;
        self.started = Some(Instant::now());
        self.write_log();
        if self.tuner.is_done() {
            self.done = true;
            let best = self.tuner.best();
            tracing::info!(
                fusion_threshold = best.fusion_threshold,
                cycle_time = ?best.cycle_time,
                "autotune: done"
            );
        }
    }

    /// Rank 0's new parameters, once.
    pub fn take_decision(&mut self) -> Option<Params> {
        self.decision.take()
    }

    /// Rewrites the CSV log whenever a point was added, so a crash keeps what was learnt.
    fn write_log(&mut self) {
        let rows = self.tuner.csv_rows();
        let Some(path) = &self.log else { return };
        if rows.len() == self.logged_points && !self.tuner.is_done() {
            return;
        }
        self.logged_points = rows.len();
        let text = std::iter::once(Tuner::csv_header().to_string())
            .chain(rows)
            .collect::<Vec<_>>()
            .join("\n");
        if let Err(e) = std::fs::write(path, text + "\n") {
            tracing::warn!(
                "autotune: cannot write HVD_AUTOTUNE_LOG {}: {e}",
                path.display()
            );
        }
    }
}
