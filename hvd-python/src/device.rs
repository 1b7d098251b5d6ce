//! CUDA tensors of a framework (torch's), by device pointer: the path they take, and the
//! memory of their device, in which hvd makes the results whose shape differs from the
//! input (allgather, alltoall, reducescatter) and hands them back as DLPack capsules.

use std::sync::{Arc, Mutex, PoisonError};

use hvd::core::DeviceMemory;
use hvd::nccl::{CudaMemory, NcclConfig};
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::running;

/// The memory made for each device so far, one per process (each with a stream of its
/// own), kept for the process's life: a step's results come from it again and again.
static MEMORIES: Mutex<Vec<(u32, Arc<dyn DeviceMemory>)>> = Mutex::new(Vec::new());

/// The memory of CUDA device `ordinal`.
pub(crate) fn memory(ordinal: u32) -> PyResult<Arc<dyn DeviceMemory>> {
    let mut made = MEMORIES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, memory)) = made.iter().find(|(o, _)| *o == ordinal) {
        return Ok(memory.clone());
    }
    let rank = running::current().map_or(0, |hvd| hvd.rank());
    let config = NcclConfig::from_env().map_err(to_py)?;
    let memory: Arc<dyn DeviceMemory> = CudaMemory::new(&config, ordinal, rank).map_err(to_py)?;
    made.push((ordinal, memory.clone()));
    Ok(memory)
}

/// Whether this process could run a job's CUDA tensors over NCCL: the library and the
/// CUDA driver load and the driver sees a device; else why not.
pub(crate) fn nccl_usable() -> Result<(), String> {
    let config = NcclConfig::from_env().map_err(|e| e.to_string())?;
    hvd::nccl::version(&config).map_err(|e| e.to_string())?;
    match hvd::nccl::device_count(&config) {
        Ok(0) => Err("the CUDA driver sees no device".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// The path the running job's CUDA tensors take, and why: `("nccl", ...)` by device
/// pointer through the job's NCCL communicator; `("staged", ...)` by device pointer,
/// copied to host memory and back by hvd's runtime (no device transport);
/// `("unreachable", reason)` when hvd cannot reach device memory at all, so a CUDA
/// tensor's collective fails with the reason.
/// The fronts ask once per job, so this logs it once: at info for NCCL, and as a warning
/// otherwise (a GPU job that stages its gradients runs far below NCCL's speed).
#[pyfunction]
pub fn device_path() -> PyResult<(&'static str, String)> {
    let hvd = running::current()?;
    let (path, why) = path_of(&hvd)?;
    let rank = hvd.rank();
    match path {
        "nccl" => tracing::info!("rank {rank}: CUDA tensors go {why}"),
        "unreachable" => tracing::warn!("rank {rank}: CUDA tensors cannot be used: {why}"),
        _ => tracing::warn!("rank {rank}: CUDA tensors go {why}"),
    }
    Ok((path, why))
}

fn path_of(hvd: &hvd::Hvd) -> PyResult<(&'static str, String)> {
    if let Some(name) = hvd.device_transports().first() {
        return Ok(("nccl", format!("by device pointer over {name}")));
    }
    let config = NcclConfig::from_env().map_err(to_py)?;
    Ok(match hvd::nccl::device_count(&config) {
        Ok(_) => (
            "staged",
            format!(
                "by device pointer, staged through host memory by hvd's runtime over {} \
                 (the job has no NCCL communicator: {})",
                hvd.transport(),
                why_no_nccl()
            ),
        ),
        Err(e) => ("unreachable", format!("hvd cannot reach CUDA memory: {e}")),
    })
}

/// Why the job runs without NCCL, for the log line.
fn why_no_nccl() -> String {
    match hvd::Backend::named() {
        Ok(Some(backend)) => format!("HVD_BACKEND={}", backend.name()),
        _ => nccl_usable()
            .err()
            .unwrap_or_else(|| "NCCL was not asked for".into()),
    }
}

/// The version code (`major*10000 + minor*100 + patch`) of the NCCL this process loads
/// (`HVD_NCCL_LIBRARY`, else `libnccl.so.2`), 0 when none loads.
#[pyfunction]
pub fn nccl_version() -> u32 {
    NcclConfig::from_env()
        .and_then(|config| hvd::nccl::version(&config))
        .map_or(0, |v| v.major * 10000 + v.minor * 100 + v.patch)
}

/// How many CUDA devices the driver this process loads sees (`HVD_CUDA_LIBRARY`, else
/// `libcuda.so.1`), 0 when none loads.
#[pyfunction]
pub fn cuda_device_count() -> u32 {
    NcclConfig::from_env()
        .and_then(|config| hvd::nccl::device_count(&config))
        .unwrap_or(0)
}
