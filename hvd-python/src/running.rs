//! The one running hvd job of this Python process: the state that starting, elastic
//! rounds, collectives and device queries all read, in a module that needs none of them.

use std::sync::{PoisonError, RwLock, RwLockWriteGuard};

use hvd::{Hvd, ProcessSet};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

static JOB: RwLock<Option<Hvd>> = RwLock::new(None);

/// The running job, or the error Horovod gives before `init`.
pub fn current() -> PyResult<Hvd> {
    JOB.read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .ok_or_else(|| PyValueError::new_err("hvd has not been initialized; use hvd.init()."))
}

/// Whether a job was started and not shut down here.
pub fn is_set() -> bool {
    JOB.read().unwrap_or_else(PoisonError::into_inner).is_some()
}

/// The job's slot, held for a start that must check and fill it at once.
pub fn slot() -> RwLockWriteGuard<'static, Option<Hvd>> {
    JOB.write().unwrap_or_else(PoisonError::into_inner)
}

/// The process set with this id (0: every rank).
pub fn process_set(id: usize) -> PyResult<ProcessSet> {
    current()?.process_set(id).ok_or_else(|| {
        PyValueError::new_err(format!(
            "process set {id} does not exist (removed, or never added with add_process_set)"
        ))
    })
}

/// Makes `hvd` the running job (an elastic round's), ending any other.
pub fn install(py: Python<'_>, hvd: Hvd) {
    let previous = slot().replace(hvd);
    if let Some(previous) = previous {
        py.detach(|| previous.shutdown());
    }
}

/// Leaves the job; the other ranks' pending and later collectives fail naming this rank.
pub fn end(py: Python<'_>) {
    let job = slot().take();
    if let Some(hvd) = job {
        py.detach(|| hvd.shutdown());
    }
}
