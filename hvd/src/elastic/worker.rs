//! [`Worker`]: this process's part in an elastic job, as hvdrun started it.

use std::sync::Arc;
use std::time::Duration;

use hvd_core::units::parse_timeout;
use hvd_core::{PrefixStore, Result, Store, env};
use hvd_rendezvous::elastic::{
    AFTER_VAR, Assignment, Leaving, NextRound, WORKER_VAR, fatal_key, next_round, round_prefix,
    updates, waiting_key,
};

use crate::{Hvd, ReduceOp, World};

/// How long a worker waits for a round to include it, set by hvdrun from
/// `--elastic-timeout`.
const TIMEOUT_VAR: &str = "HVD_ELASTIC_TIMEOUT";

/// The wait without hvdrun's word: Horovod's default elastic timeout.
const DEFAULT_ROUND_TIMEOUT: Duration = Duration::from_secs(600);

/// A process hvdrun started on one slot of one host of an elastic job: what [`run`]
/// uses to move from round to round, public for other fronts (the Python one) that run
/// their own loop.
///
/// [`run`]: super::run
pub struct Worker {
    /// `host:slot.N`, which names it for as long as it lives.
    id: String,
    /// The job's store, served by hvdrun.
    store: Arc<dyn Store>,
    /// The newest round formed when hvdrun started it: it joins a later one.
    after: u64,
    round_timeout: Duration,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("id", &self.id)
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// The worker hvdrun started this process as; `None` outside an elastic job.
    pub fn from_env() -> Result<Option<Worker>> {
        let Ok(id) = std::env::var(WORKER_VAR) else {
            return Ok(None);
        };
        let after = env::parse_first::<u64, _>(&[AFTER_VAR], "a round number")?
            .map_or(0, |(_, round)| round);
        let round_timeout = match std::env::var(TIMEOUT_VAR) {
            Ok(value) => parse_timeout(TIMEOUT_VAR, &value)?,
            Err(_) => DEFAULT_ROUND_TIMEOUT,
        };
        Ok(Some(Worker {
            id,
            store: hvd_rendezvous::launcher_store()?,
            after,
            round_timeout,
        }))
    }

    /// The worker's name in the job (`host:slot.N`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The newest round formed when hvdrun started this worker: it joins a later one.
    pub fn after(&self) -> u64 {
        self.after
    }

    /// Waits for a round newer than `after`.
    pub fn next_round(&self, after: u64) -> Result<NextRound> {
        next_round(self.store.as_ref(), &self.id, after, self.round_timeout)
    }

    /// This worker's place in `round`, with the round's own keys of the store.
    pub fn world(&self, round: u64, assignment: &Assignment) -> World {
        World {
            rank: assignment.rank,
            size: assignment.size,
            launcher: "hvdrun (elastic)",
            store: Arc::new(PrefixStore::new(self.store.clone(), round_prefix(round))),
            local_size: Some(assignment.local_size),
        }
    }

    /// How many host changes hvdrun has announced.
    pub fn updates(&self) -> Result<u64> {
        updates(self.store.as_ref())
    }

    /// Whether hvdrun has announced host changes since the round was formed with
    /// `updates_at_round` of them. Collective over the round: rank 0 asks hvdrun and
    /// every rank follows its answer, so all leave at the same step.
    pub fn hosts_updated(&self, hvd: &Hvd, updates_at_round: u64) -> Result<bool> {
        let changed = if hvd.rank() == 0 {
            i32::from(self.updates()? > updates_at_round)
        } else {
            0
        };
        let changed = hvd.allreduce("hvd.elastic.hosts", vec![changed], ReduceOp::Max)?;
        Ok(changed[0] != 0)
    }

    /// Tells hvdrun this worker left `round` and waits for the next one. A store that
    /// cannot be reached costs hvdrun only the wait for this worker, so it is logged.
    pub fn leave(&self, round: u64, why: Leaving) {
        let posted = self
            .store
            .set(&waiting_key(round, &self.id), why.as_str().as_bytes());
        if let Err(e) = posted {
            tracing::warn!(
                "worker {}: could not tell hvdrun it left round {round}: {e}",
                self.id
            );
        }
    }

    /// Tells hvdrun this worker failed with an error no round cures (`message` says
    /// which); the job ends with it.
    pub fn report_fatal(&self, message: &str) {
        let posted = self.store.set(&fatal_key(&self.id), message.as_bytes());
        if let Err(e) = posted {
            tracing::warn!(
                "worker {}: could not report its failure to hvdrun: {e}",
                self.id
            );
        }
    }
}
