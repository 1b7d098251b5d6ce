//! The job's functions for Python: `init` and `shutdown`, topology, process sets, the
//! Timeline. The job itself is in `running.rs`.

use std::sync::{Condvar, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::running::{current, process_set};
use crate::{device, elastic, running};

/// Joins the job the launcher started (a job of one rank without one). A second call is
/// a no-op, as in Horovod, while the job runs; once it has ended (shut down here or by
/// another rank) it starts the job again. `process_sets` are created at start, ids 1,
/// 2, ... in order. Returns whether it started a job.
///
/// The job's lock is never held while the GIL is released: a thread that holds the GIL
/// and waits for the lock (a TensorFlow graph's collective still running after its run
/// failed, calling in while this rank starts again) would keep the starting thread from
/// taking the GIL back, and neither would ever go on.
#[pyfunction]
#[pyo3(signature = (process_sets = Vec::new()))]
pub fn init(py: Python<'_>, process_sets: Vec<Vec<usize>>) -> PyResult<bool> {
    let _starting = Starting::wait_turn(py);
    let ended = {
        let mut job = running::slot();
        match job.as_ref() {
            Some(hvd) if hvd.stopped().is_none() => return Ok(false),
            _ => job.take(),
        }
    };
    if let Some(ended) = ended {
        py.detach(|| ended.shutdown());
    }
    if elastic::worker()?.is_some() {
        if !process_sets.is_empty() {
            return Err(PyValueError::new_err(
                "an elastic job cannot have process sets created at init: its ranks change from round to round; add them in each round with add_process_set",
            ));
        }
        // The first round; a worker removed before it joins one has nothing to do.
        if elastic::elastic_join(py)?.is_none() {
            return Err(pyo3::exceptions::PySystemExit::new_err(0));
        }
        return Ok(true);
    }
    let hvd = py
        .detach(|| builder(process_sets)?.build())
        .map_err(to_py)?;
    running::install(py, hvd);
    Ok(true)
}

/// Whether a thread of this process is starting a job, and the signal that it is done.
static STARTING: Mutex<bool> = Mutex::new(false);
static STARTED: Condvar = Condvar::new();

/// This thread's turn to start the job. Threads that call `init` at once take turns, so
/// the first starts the job and the others find it running: two starts would join the
/// job twice as the same rank. A turn lasts at most the start timeout (an elastic
/// worker's: the wait for its first round), after which the start fails; the wait for a
/// turn releases the GIL, which the starting thread needs.
struct Starting;

impl Starting {
    fn wait_turn(py: Python<'_>) -> Starting {
        py.detach(|| {
            let mut busy = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
            while *busy {
                busy = STARTED.wait(busy).unwrap_or_else(PoisonError::into_inner);
            }
            *busy = true;
        });
        Starting
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        *STARTING.lock().unwrap_or_else(PoisonError::into_inner) = false;
        STARTED.notify_all();
    }
}

/// The job's builder: with NCCL beside the host transport when no backend is named and
/// this process can run NCCL, so that CUDA tensors go to it by device pointer (as in a
/// Horovod built with NCCL); `HVD_BACKEND` naming a host transport keeps them staged.
fn builder(process_sets: Vec<Vec<usize>>) -> hvd::Result<hvd::Builder> {
    let builder = hvd::Builder::new().process_sets(process_sets);
    Ok(match hvd::Backend::named()? {
        None if device::nccl_usable().is_ok() => builder.backend(hvd::Backend::Nccl),
        _ => builder,
    })
}

/// Leaves the job; the other ranks' pending and later collectives fail naming this rank.
#[pyfunction]
pub fn shutdown(py: Python<'_>) {
    running::end(py);
}

#[pyfunction]
pub fn is_initialized() -> bool {
    running::is_set()
}

/// The job's topology as (rank, size, local_rank, local_size, cross_rank, cross_size).
#[pyfunction]
pub fn topology() -> PyResult<(usize, usize, usize, usize, usize, usize)> {
    let hvd = current()?;
    Ok((
        hvd.rank(),
        hvd.size(),
        hvd.local_rank(),
        hvd.local_size(),
        hvd.cross_rank(),
        hvd.cross_size(),
    ))
}

/// Creates a process set of these global ranks (every rank must call it); returns its id.
#[pyfunction]
pub fn add_process_set(py: Python<'_>, ranks: Vec<usize>) -> PyResult<usize> {
    let hvd = current()?;
    let set = py.detach(|| hvd.add_process_set(&ranks)).map_err(to_py)?;
    Ok(set.id())
}

/// Removes a process set (every rank must call it).
#[pyfunction]
pub fn remove_process_set(py: Python<'_>, id: usize) -> PyResult<()> {
    let hvd = current()?;
    let set = process_set(id)?;
    py.detach(|| hvd.remove_process_set(&set)).map_err(to_py)
}

/// The global ranks of a process set's members, in the set's rank order.
#[pyfunction]
pub fn process_set_ranks(id: usize) -> PyResult<Vec<usize>> {
    Ok(process_set(id)?.ranks().to_vec())
}

/// Starts recording the Timeline to `path` (written by rank 0), marking every
/// negotiation cycle when `mark_cycles`.
#[pyfunction]
#[pyo3(signature = (path, mark_cycles = false))]
pub fn start_timeline(path: std::path::PathBuf, mark_cycles: bool) -> PyResult<()> {
    let hvd = current()?;
    hvd.mark_timeline_cycles(mark_cycles);
    hvd.start_timeline(path).map_err(to_py)
}

/// Whether every host of the job runs the same number of ranks.
#[pyfunction]
pub fn is_homogeneous() -> PyResult<bool> {
    let hvd = current()?;
    let hosts = hvd
        .topology()
        .map(|t| t.hosts().to_vec())
        .unwrap_or_default();
    let per_host = |host: &u32| hosts.iter().filter(|h| *h == host).count();
    Ok(hosts.iter().all(|h| per_host(h) == hvd.local_size()))
}

/// The transport the job runs on (`shm`, `tcp`, `hierarchical`, `mpi`, `rdma`).
#[pyfunction]
pub fn transport() -> PyResult<&'static str> {
    Ok(current()?.transport())
}

/// The transports compiled into this build, by name.
#[pyfunction]
pub fn built_transports() -> Vec<&'static str> {
    hvd::Backend::compiled()
        .into_iter()
        .map(hvd::Backend::name)
        .collect()
}

/// Stops the Timeline; returns once rank 0's file holds what was recorded (a fraction
/// of a second), without the GIL meanwhile.
#[pyfunction]
pub fn stop_timeline(py: Python<'_>) -> PyResult<()> {
    let hvd = current()?;
    py.detach(|| hvd.stop_timeline());
    Ok(())
}
