//! Elastic training from Python: this worker's side of hvdrun's rendezvous rounds (see
//! `hvd::elastic`). The loop over rounds, the states and the sampler are Python
//! (`hvd.common.elastic`); what needs the store or the runtime is here, shared with the
//! Rust front.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use hvd::elastic::{Worker, newest_root};
use hvd::rendezvous::elastic::{Leaving, NextRound};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::running;

/// The worker hvdrun started this process as, if it did (read once).
static WORKER: OnceLock<Option<Arc<Worker>>> = OnceLock::new();

/// The round this worker is in, and the host changes announced when it was formed.
static ROUND: Mutex<Option<(u64, u64)>> = Mutex::new(None);

/// This process's worker, `None` outside an elastic job.
pub fn worker() -> PyResult<Option<Arc<Worker>>> {
    if let Some(worker) = WORKER.get() {
        return Ok(worker.clone());
    }
    let worker = Worker::from_env().map_err(to_py)?.map(Arc::new);
    Ok(WORKER.get_or_init(|| worker).clone())
}

fn current_round() -> PyResult<(u64, u64)> {
    ROUND
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .ok_or_else(|| PyValueError::new_err("this elastic worker has not joined a round yet"))
}

/// The elastic worker's name (`host:slot.N`), or `None` outside an elastic job.
#[pyfunction]
pub fn elastic_worker() -> PyResult<Option<String>> {
    Ok(worker()?.map(|w| w.id().to_owned()))
}

/// Joins the next round (the first one this worker can, when it has none yet) and
/// starts the job over it. Returns the round, or `None` when this worker has no place
/// in it: its host was removed from the job, and its process should exit 0.
#[pyfunction]
pub fn elastic_join(py: Python<'_>) -> PyResult<Option<u64>> {
    let Some(worker) = worker()? else {
        return Err(PyValueError::new_err(
            "not an elastic worker: start the job with hvdrun --elastic or --host-discovery-script",
        ));
    };
    let after = current_round().map_or(worker.after(), |(round, _)| round);
    let next = py.detach(|| worker.next_round(after)).map_err(to_py)?;
    let (round, assignment) = match next {
        NextRound::Joined { round, assignment } => (round, assignment),
        NextRound::Removed { round } => {
            eprintln!(
                "hvd: worker {} has no place in round {round}: its host was removed from the job; exiting",
                worker.id()
            );
            return Ok(None);
        }
    };
    *ROUND.lock().unwrap_or_else(PoisonError::into_inner) = Some((round, assignment.updates));
    let world = worker.world(round, &assignment);
    let hvd = py
        .detach(|| hvd::Builder::new().world(world).build())
        .map_err(to_py)?;
    running::install(py, hvd);
    Ok(Some(round))
}

/// Ends this worker's part in its round (the job stops here) and tells hvdrun why:
/// `"failed"` (a peer was lost; the state went back to its last commit) or `"updated"`
/// (hvdrun announced host changes).
#[pyfunction]
pub fn elastic_leave(py: Python<'_>, why: &str) -> PyResult<()> {
    let leaving = Leaving::parse(why.as_bytes()).ok_or_else(|| {
        PyValueError::new_err(format!("why must be 'failed' or 'updated', not {why:?}"))
    })?;
    let (round, _) = current_round()?;
    running::end(py);
    if let Some(worker) = worker()? {
        worker.leave(round, leaving);
    }
    Ok(())
}

/// Whether hvdrun announced host changes since this round was formed. Collective: every
/// rank of the round calls it at the same step, and all get rank 0's answer.
#[pyfunction]
pub fn elastic_hosts_updated(py: Python<'_>) -> PyResult<bool> {
    let Some(worker) = worker()? else {
        return Ok(false);
    };
    let (_, updates) = current_round()?;
    let hvd = running::current()?;
    py.detach(|| worker.hosts_updated(&hvd, updates))
        .map_err(to_py)
}

/// The rank whose state every rank takes as the round starts (the lowest holding the
/// newest commit) and that commit's count; `commits` is this rank's. Collective.
#[pyfunction]
pub fn elastic_newest_root(py: Python<'_>, commits: u64) -> PyResult<(usize, u64)> {
    let hvd = running::current()?;
    py.detach(|| newest_root(&hvd, commits)).map_err(to_py)
}

/// Tells hvdrun this worker failed with an error no new round cures; the job ends.
#[pyfunction]
pub fn elastic_report_fatal(message: &str) -> PyResult<()> {
    if let Some(worker) = worker()? {
        worker.report_fatal(message);
    }
    Ok(())
}
