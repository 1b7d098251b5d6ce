//! Benchmarks on a device transport (`--backend nccl`): the transport beside the host
//! one, and the device memory the benchmarked tensors live in.

use std::sync::Arc;

use hvd::core::DeviceMemory;
use hvd::{Backend, Collective, Result, Topology, World, transport};

/// A device transport and this rank's device memory.
pub struct Device {
    pub collective: Arc<dyn Collective>,
    pub memory: Arc<dyn DeviceMemory>,
}

/// The device transport of `backend` (none for a host backend), over the ranks of the
/// host transport's `topology`.
pub fn connect(backend: Backend, world: &World, topology: &Topology) -> Result<Option<Device>> {
    let Some(collective) = transport::connect_device(backend, world, topology)? else {
        return Ok(None);
    };
    Ok(Some(Device {
        collective: Arc::from(collective),
        memory: memory(topology)?,
    }))
}

#[cfg(feature = "nccl")]
fn memory(topology: &Topology) -> Result<Arc<dyn DeviceMemory>> {
    hvd::device::memory(topology.rank(), topology.local_rank())
}

#[cfg(not(feature = "nccl"))]
fn memory(_: &Topology) -> Result<Arc<dyn DeviceMemory>> {
    Err(hvd::Error::Unsupported {
        backend: "hvd-bench",
        what: "device memory in a build without the nccl feature".into(),
    })
}
