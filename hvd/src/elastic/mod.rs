//! Elastic training: a job that survives losing a host, grows when one is added, and
//! never repeats or loses an example.
//!
//! Started by `hvdrun --elastic` (or with `--host-discovery-script`), each process is a
//! worker for one slot of one host; hvdrun forms rendezvous rounds from the workers it
//! can count on and tells each its rank in the round. [`run`] joins a round, starts the
//! runtime over it, brings every rank's [`State`] to the newest commit, and calls the
//! training function. When that fails because a peer was lost or went silent, every
//! survivor goes back to its last commit, leaves the round, and joins the next one
//! (without the lost host); when hvdrun announces new or removed hosts, every rank
//! leaves at its next [`commit`](Context::commit), keeping its work, and the job goes on
//! at the new size. A worker whose host was removed finds no place in the next round
//! and [`run`] returns `Ok(None)`: its process should exit 0. Any other error (a
//! mismatch between ranks, a bad argument) is a bug: it is reported to hvdrun, which
//! ends the job with it.
//!
//! ```no_run
//! use hvd::elastic::{self, ElasticSampler, State, TensorState};
//! use hvd::ReduceOp;
//!
//! # fn main() -> hvd::Result<()> {
//! let mut state = TensorState::new();
//! state.set("w", &[0.0f64; 8]);
//! let mut sampler = ElasticSampler::new(60_000, 64);
//! let done = elastic::run(&mut state, |ctx, state| {
//!     sampler.load_from(state, "sampler");
//!     let (rank, size) = (ctx.hvd().rank(), ctx.hvd().size());
//!     while !sampler.epoch_done() {
//!         let mine = sampler.next_batch(rank, size);
//!         # let grad = vec![mine.len() as f64; 8];
//!         let grad = ctx.hvd().allreduce("grad", grad, ReduceOp::Sum)?;
//!         # let _ = grad;
//!         sampler.advance();
//!         sampler.save_to(state, "sampler");
//!         ctx.commit(state)?;
//!     }
//!     Ok(())
//! })?;
//! if done.is_none() {
//!     return Ok(()); // this host was removed from the job
//! }
//! # Ok(())
//! # }
//! ```

mod context;
mod state;
mod worker;

use std::sync::Arc;

use hvd_core::{Error, Result};
use hvd_rendezvous::elastic::{Leaving, NextRound};

pub use context::{Context, newest_root};
pub use hvd_core::sampler::ElasticSampler;
pub use state::{State, TensorState};

use crate::Builder;
pub use worker::Worker;

/// Runs `train` elastically with [`Builder::new`]'s defaults: see [`Runner::run`].
pub fn run<S: State, T>(
    state: &mut S,
    train: impl FnMut(&mut Context, &mut S) -> Result<T>,
) -> Result<Option<T>> {
    Runner::new().run(state, train)
}

/// How each round's runtime is built, and the loop over rounds.
pub struct Runner {
    configure: Box<dyn Fn(Builder) -> Builder>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").finish_non_exhaustive()
    }
}

impl Default for Runner {
    fn default() -> Self {
        Runner::new()
    }
}

impl Runner {
    pub fn new() -> Runner {
        Runner {
            configure: Box::new(|builder| builder),
        }
    }

    /// Sets the options of every round's runtime (compression, process sets, a
    /// configuration); the round's place in the job is set after it.
    pub fn configure(mut self, configure: impl Fn(Builder) -> Builder + 'static) -> Self {
        self.configure = Box::new(configure);
        self
    }

    /// Runs `train` until it returns, through as many rounds as failures and host
    /// changes need. Returns its result, or `None` on a worker whose host was removed
    /// from the job (its process should exit 0). Outside an elastic job (no hvdrun
    /// `--elastic`), runs it once over the launcher's job, after syncing `state` from
    /// rank 0, and returns its result.
    pub fn run<S: State, T>(
        &self,
        state: &mut S,
        mut train: impl FnMut(&mut Context, &mut S) -> Result<T>,
    ) -> Result<Option<T>> {
        let Some(worker) = Worker::from_env()? else {
            let hvd = (self.configure)(Builder::new()).build()?;
            let mut ctx = Context::new(hvd, 0, 0, 0, None);
            state.reset(ctx.hvd())?;
            ctx.sync(state)?;
            return train(&mut ctx, state).map(Some);
        };
        let worker = Arc::new(worker);
        // A failure before the first commit goes back to the start.
        state.save()?;
        let (mut after, mut commits) = (worker.after(), 0);
        loop {
            let (round, assignment) = match worker.next_round(after)? {
                NextRound::Joined { round, assignment } => (round, assignment),
                NextRound::Removed { round } => {
                    eprintln!(
                        "hvd: worker {} has no place in round {round}: its host was removed from the job; exiting",
                        worker.id()
                    );
                    return Ok(None);
                }
            };
            after = round;
            let updates = assignment.updates;
            let world = worker.world(round, &assignment);
            let outcome = (self.configure)(Builder::new())
                .world(world)
                .build()
                .and_then(|hvd| {
                    let mut ctx = Context::new(hvd, round, commits, updates, Some(worker.clone()));
                    let result = state
                        .reset(ctx.hvd())
                        .and_then(|()| ctx.sync(state))
                        .and_then(|()| train(&mut ctx, state));
                    commits = ctx.commits();
                    result
                });
            let leaving = match outcome {
                Ok(result) => return Ok(Some(result)),
                Err(Error::HostsUpdated { .. }) => Leaving::Updated,
                Err(e) if e.is_recoverable() => {
                    tracing::warn!(
                        "worker {}: round {round} failed, back to commit {commits}: {e}",
                        worker.id()
                    );
                    state.restore()?;
                    Leaving::Failed
                }
                Err(e) => {
                    worker.report_fatal(&e.to_string());
                    return Err(e);
                }
            };
            worker.leave(round, leaving);
        }
    }
}
