//! Connecting the chosen transport: the host one (within and across hosts), the device
//! one beside it, the launcher's witness around both, and the router over them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hvd_core::provider::Carries;
use hvd_core::{Collective, Error, PrefixStore, Result};
use hvd_runtime::Router;

use super::Backend;
use super::hierarchy::hierarchical_over;
use super::providers::providers;
use crate::World;
use crate::witness::LossWitness;

/// This process's place in the job, as `backend` needs it: a transport whose ranks meet
/// through their launcher (MPI) needs no rendezvous store (`HVD_STORE_DIR`); NCCL's ranks
/// meet through the store, whatever the host transport.
pub fn world(backend: Backend) -> Result<World> {
    match backend.provider() {
        Some(p) if !p.rendezvous() => World::from_env_without_store(),
        _ => World::from_env(),
    }
}

/// How many times this process has started the job its environment describes: a start
/// after the first (`Hvd::shutdown`, then `hvd::init()` again, as `hvd.init()` after
/// `hvd.shutdown()` in Python) rendezvouses under fresh store keys, so it never meets the
/// addresses of the last one. Every rank of a job starts the same number of times, as
/// Horovod requires.
static STARTS: AtomicUsize = AtomicUsize::new(0);

/// The transports of one start: the host one, and for `nccl` the device one beside it.
pub(crate) type Started = (Box<dyn Collective>, Option<Box<dyn Collective>>);

/// Connects this rank of the environment's job (`world`, from [`world`]) for this
/// process's next start of it, and checks in with the launcher.
pub(crate) fn connect_start(backend: Backend, world: &World) -> Result<Started> {
    let start = STARTS.fetch_add(1, Ordering::Relaxed);
    // The transports meet the others under the start's keys; what ranks tell their
    // launcher (check-in, lost peers) stays where it reads it.
    let fresh = match start {
        0 => world.clone(),
        _ => World {
            store: Arc::new(PrefixStore::new(
                world.store.clone(),
                format!("restart{start}/"),
            )),
            ..world.clone()
        },
    };
    let host = connected(connect_transport(backend.host(world)?, &fresh)?, world)?;
    let device = device_transport(backend, &fresh, host.topology())?;
    Ok((host, device.map(|device| witnessed(device, world))))
}

/// Connects this rank's device transport for `backend` (NCCL), over the ranks and hosts
/// of the host transport's `topology`; `None` for a host backend.
pub fn connect_device(
    backend: Backend,
    world: &World,
    topology: &hvd_core::Topology,
) -> Result<Option<Box<dyn Collective>>> {
    let device = device_transport(backend, world, topology)?;
    Ok(device.map(|device| witnessed(device, world)))
}

fn device_transport(
    backend: Backend,
    world: &World,
    topology: &hvd_core::Topology,
) -> Result<Option<Box<dyn Collective>>> {
    match backend.provider() {
        Some(p) if p.carries() == Carries::Device => Ok(Some(p.connect(world, Some(topology))?)),
        _ => Ok(None),
    }
}

/// The router the runtime's middleware sits on: `host` for host tensors and negotiation,
/// `devices` (asked in this order) for device tensors, and the rest staged through host
/// memory where this build can.
pub(crate) fn router(host: Arc<dyn Collective>, devices: Vec<Arc<dyn Collective>>) -> Router {
    let router = devices.into_iter().fold(Router::new(host), Router::with);
    match staging() {
        Some(staging) => router.with_staging(staging),
        None => router,
    }
}

/// Connects this rank of `world` through `backend`, and checks in with the launcher.
pub fn connect(backend: Backend, world: &World) -> Result<Box<dyn Collective>> {
    connected(connect_transport(backend, world)?, world)
}

/// `collective`, connected, once the launcher of `world` knows.
fn connected(collective: Box<dyn Collective>, world: &World) -> Result<Box<dyn Collective>> {
    // Every program that connects this way shows in its launcher's progress, and is not
    // taken for a rank that never started.
    world.check_in();
    Ok(witnessed(collective, world))
}

/// `collective`, which under hvdrun tells the launcher which peer it lost when it fails:
/// hvdrun reads it to name the one that died.
fn witnessed(collective: Box<dyn Collective>, world: &World) -> Box<dyn Collective> {
    if world.launched_by_hvdrun() {
        return Box::new(LossWitness::new(collective, world.store.clone()));
    }
    collective
}

fn connect_transport(backend: Backend, world: &World) -> Result<Box<dyn Collective>> {
    let provider = backend.compiled_provider()?;
    if provider.carries() == Carries::Device {
        return Err(Error::Unsupported {
            backend: provider.name(),
            what: "host tensors: connect the host transport (Backend::host) and NCCL beside \
                   it (connect_device)"
                .into(),
        });
    }
    let flat = provider.connect(world, None)?;
    if provider.under_hierarchy() {
        return hierarchical_over(flat, world);
    }
    Ok(flat)
}

/// Host staging for device tensors no transport takes, from the first provider that has
/// device memory to offer (NCCL's, through the CUDA driver); `None` when none has.
pub fn staging() -> Option<hvd_runtime::DeviceMemoryFor> {
    let rank = World::from_env_without_store().map_or(0, |w| w.rank);
    providers().iter().find_map(|p| p.staging(rank))
}
