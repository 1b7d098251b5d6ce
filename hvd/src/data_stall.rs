//! Whether the job is data-bound, and which rank's input holds it back: every rank times
//! its steps with a [`StepClock`], and at the end of each epoch [`epoch_report`]
//! exchanges the times (one small allgather) and splits every step into data wait,
//! compute, own communication and waiting for other ranks, charging the job's wait to
//! the rank whose data was late (see [`hvd_data::stall`]).
//!
//! ```no_run
//! use hvd::ReduceOp;
//! use hvd::data::{Augment, ElasticSampler, Loader, LoaderOptions, Synthetic};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hvd = hvd::init()?;
//! let source = Synthetic::new(1024, 256, 256, 10);
//! let mut loader = Loader::new(source, Augment::train(224), LoaderOptions::default())?;
//! let mut sampler = ElasticSampler::new(1024, 64);
//! let mut clock = hvd::data_stall::step_clock(&hvd);
//! for epoch in 0..3 {
//!     sampler.set_epoch(epoch);
//!     let mut batches = loader.epoch(&sampler, hvd.rank(), hvd.size())?;
//!     while let Some(batch) = clock.data(|| batches.next_batch())? {
//!         let grads = vec![batch.images()[0]; 1000]; // forward and backward
//!         clock.comm(|| hvd.allreduce("grads", grads, ReduceOp::Average))?;
//!         sampler.advance();
//!         clock.step();
//!     }
//!     // Rank 0 logs `data-bound 23 % of the epoch (...): rank 3 waited for data ...`.
//!     let report = hvd::data_stall::epoch_report(&hvd, &mut clock)?;
//!     # let _ = report;
//! }
//! # Ok(())
//! # }
//! ```

use hvd_core::{Error, Result};
pub use hvd_data::stall::{
    DATA_ROW, DATA_WAIT, RankParts, StallReport, StepClock, StepTimes, attribute,
};

use crate::Hvd;

/// The data-bound share from which the epoch's line is a warning (seen at hvd's default
/// log level) rather than information: past it, a faster input pipeline pays.
pub const WARN_AT: f64 = 0.05;

/// A clock whose waits for data also show in the Timeline, as `DATA_WAIT` spans on each
/// rank's `data` row.
pub fn step_clock(hvd: &Hvd) -> StepClock {
    StepClock::traced(hvd.tracer())
}

/// Ends an epoch on every rank (collective): gathers every rank's step times from
/// `clock` (two allgathers: the step counts, then three numbers a step), attributes
/// them, and restarts `clock` for the next epoch's first step. Rank 0 logs the report's
/// line, at warn from [`WARN_AT`] data-bound, else at info. Every rank must have timed the same steps; an error names the rank
/// that did not.
pub fn epoch_report(hvd: &Hvd, clock: &mut StepClock) -> Result<StallReport> {
    let steps = clock.take_steps();
    let counts = hvd.allgather("hvd.data_stall.steps", vec![steps.len() as i64])?;
    let flat: Vec<f64> = steps
        .iter()
        .flat_map(|s| [s.data, s.comm, s.wall])
        .collect();
    let gathered = hvd.allgather("hvd.data_stall.times", flat)?;
    // Both ranks leave the allgather together: the next step starts alike everywhere.
    clock.restart();
    let mut ranks = Vec::with_capacity(counts.len());
    let mut rest = gathered.as_slice();
    for count in counts {
        let (mine, tail) = rest.split_at((count as usize * 3).min(rest.len()));
        ranks.push(
            mine.chunks_exact(3)
                .map(|t| StepTimes {
                    data: t[0],
                    comm: t[1],
                    wall: t[2],
                })
                .collect(),
        );
        rest = tail;
    }
    let report = attribute(&ranks).map_err(|e| {
        Error::invalid(
            hvd.rank(),
            "data_stall",
            "hvd.data_stall.times",
            e.to_string(),
        )
    })?;
    if hvd.rank() == 0 {
        if report.data_bound() >= WARN_AT {
            tracing::warn!("{report}");
        } else {
            tracing::info!("{report}");
        }
    }
    Ok(report)
}
