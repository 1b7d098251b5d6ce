//! The native half of `hvd.*.data.instrument`: the time this process spent blocked in
//! collectives, the Timeline's `DATA_WAIT` spans, and the attribution of an epoch from
//! every rank's step times (hvd's `data_stall`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hvd::data_stall::{StepTimes, attribute};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::running;

/// Nanoseconds spent in `wait` on handles and in barriers, since the process started.
static BLOCKED_NS: AtomicU64 = AtomicU64::new(0);

/// Counts its lifetime as time blocked in a collective.
pub(crate) struct Blocked(Instant);

impl Blocked {
    pub(crate) fn start() -> Self {
        Blocked(Instant::now())
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        let ns = u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        BLOCKED_NS.fetch_add(ns, Ordering::Relaxed);
    }
}

/// Seconds this process has spent blocked in collectives (waits on handles, barriers).
#[pyfunction]
pub fn comm_seconds() -> f64 {
    BLOCKED_NS.load(Ordering::Relaxed) as f64 / 1e9
}

/// Opens a `DATA_WAIT` span on this rank's `data` row of the Timeline (nothing when the
/// Timeline is off or there is no job).
#[pyfunction]
pub fn data_wait_begin() {
    if let Ok(hvd) = running::current() {
        let tracer = hvd.tracer();
        if tracer.enabled() {
            tracer.begin(
                hvd::data_stall::DATA_ROW,
                hvd::data_stall::DATA_WAIT,
                Default::default(),
            );
        }
    }
}

/// Closes the span [`data_wait_begin`] opened.
#[pyfunction]
pub fn data_wait_end() {
    if let Ok(hvd) = running::current() {
        hvd.tracer()
            .end(hvd::data_stall::DATA_ROW, hvd::data_stall::DATA_WAIT);
    }
}

/// Attributes an epoch: `ranks[r]` holds rank `r`'s steps as `data, comm, wall` seconds,
/// three numbers a step. Returns a dict: `line` (the sentence rank 0 logs),
/// `data_bound`, `data_lost`, `wall`, `steps`, `culprit` (a rank or None) and `ranks`
/// (per rank: `data`, `compute`, `own_comm`, `waiting`, `wall`, `late_steps`).
#[pyfunction]
pub fn stall_report<'py>(py: Python<'py>, ranks: Vec<Vec<f64>>) -> PyResult<Bound<'py, PyDict>> {
    let mut steps = Vec::with_capacity(ranks.len());
    for (rank, flat) in ranks.iter().enumerate() {
        if flat.len() % 3 != 0 {
            return Err(PyValueError::new_err(format!(
                "stall attribution: rank {rank} sent {} numbers, not three a step",
                flat.len()
            )));
        }
        steps.push(
            flat.chunks_exact(3)
                .map(|t| StepTimes {
                    data: t[0],
                    comm: t[1],
                    wall: t[2],
                })
                .collect::<Vec<_>>(),
        );
    }
    let report = attribute(&steps).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let out = PyDict::new(py);
    out.set_item("line", report.to_string())?;
    out.set_item("data_bound", report.data_bound())?;
    out.set_item("data_lost", report.data_lost)?;
    out.set_item("wall", report.wall)?;
    out.set_item("steps", report.steps)?;
    out.set_item("culprit", report.culprit())?;
    let parts = report
        .ranks
        .iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("data", r.data)?;
            d.set_item("compute", r.compute)?;
            d.set_item("own_comm", r.own_comm)?;
            d.set_item("waiting", r.waiting)?;
            d.set_item("wall", r.wall)?;
            d.set_item("late_steps", r.late_steps)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    out.set_item("ranks", parts)?;
    Ok(out)
}
