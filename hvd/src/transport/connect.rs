//! Connecting the chosen transport: the host one (within and across hosts), the device
//! one beside it, the launcher's witness around both, and the router over them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hvd_core::{Collective, Error, PrefixStore, Result};
use hvd_runtime::Router;

use super::Backend;
use crate::World;
use crate::witness::LossWitness;

/// This process's place in the job, as `backend` needs it: MPI finds its peers through
/// the launcher itself, so it needs no rendezvous store (`HVD_STORE_DIR`); NCCL's ranks
/// meet through the store, whatever the host transport.
pub fn world(backend: Backend) -> Result<World> {
    match backend {
        Backend::Mpi => World::from_env_without_store(),
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

#[cfg_attr(not(feature = "nccl"), allow(unused_variables))]
fn device_transport(
    backend: Backend,
    world: &World,
    topology: &hvd_core::Topology,
) -> Result<Option<Box<dyn Collective>>> {
    match backend {
        #[cfg(feature = "nccl")]
        Backend::Nccl => {
            let config = hvd_nccl::NcclConfig::from_env()?;
            let nccl =
                hvd_nccl::NcclCollective::connect(world.store.clone(), topology.clone(), config)?;
            Ok(Some(Box::new(nccl)))
        }
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

/// `flat` as is on one host; across hosts, unless `HVD_HIERARCHICAL_ALLREDUCE` (alias
/// `HOROVOD_HIERARCHICAL_ALLREDUCE`) is off, `Hierarchical<shm, flat>`: allreduce
/// within each host through shared memory, across hosts through `flat`.
#[cfg_attr(not(feature = "shm"), allow(unused_variables))]
fn hierarchical_over<C: Collective + 'static>(
    flat: C,
    world: &World,
) -> Result<Box<dyn Collective>> {
    let wanted = hvd_core::env::flag("HIERARCHICAL_ALLREDUCE")?;
    let topology = flat.topology().clone();
    if topology.is_single_host() || wanted == Some(false) {
        return Ok(Box::new(flat));
    }
    #[cfg(feature = "shm")]
    {
        // Every rank of a host names the host alike: by its index in the flat group.
        let host = topology.hosts()[topology.rank()];
        let store = hvd_core::PrefixStore::new(world.store.clone(), format!("hier/host{host}/"));
        let local = hvd_shm::ShmCollective::connect(
            Arc::new(store),
            topology.local_rank(),
            topology.local_size(),
            hvd_shm::ShmConfig::from_env()?,
        )?;
        Ok(Box::new(hvd_hierarchical::Hierarchical::new(flat, local)?))
    }
    #[cfg(not(feature = "shm"))]
    match wanted {
        Some(true) => Err(Error::Config {
            name: "HVD_HIERARCHICAL_ALLREDUCE".into(),
            value: "1".into(),
            expected:
                "a build with the shm feature, which hierarchical allreduce uses within hosts"
                    .into(),
        }),
        _ => Ok(Box::new(flat)),
    }
}

fn connect_transport(backend: Backend, world: &World) -> Result<Box<dyn Collective>> {
    match backend {
        #[cfg(feature = "gloo-tcp")]
        Backend::Tcp => {
            let config = hvd_gloo_tcp::TcpConfig::from_env()?;
            let tcp = hvd_gloo_tcp::TcpCollective::connect(
                world.store.clone(),
                world.rank,
                world.size,
                config,
            )?;
            hierarchical_over(tcp, world)
        }
        #[cfg(feature = "shm")]
        Backend::Shm => {
            let config = hvd_shm::ShmConfig::from_env()?;
            let shm = hvd_shm::ShmCollective::connect(
                world.store.clone(),
                world.rank,
                world.size,
                config,
            )?;
            Ok(Box::new(shm))
        }
        #[cfg(feature = "rdma")]
        Backend::Rdma => {
            let mut config = hvd_rdma::RdmaConfig::from_env()?;
            if config.provider.is_none() && !world.on_one_host()? {
                config.provider = Some(provider_between_hosts()?);
            }
            let rdma = hvd_rdma::RdmaCollective::connect(
                world.store.clone(),
                world.rank,
                world.size,
                config,
            )?;
            hierarchical_over(rdma, world)
        }
        #[cfg(feature = "mpi")]
        Backend::Mpi => {
            let mpi = hvd_mpi::MpiCollective::world(hvd_mpi::MpiConfig::from_env()?)?;
            let (rank, size) = (mpi.topology().rank(), mpi.topology().size());
            if (rank, size) != (world.rank, world.size) {
                return Err(Error::Config {
                    name: format!("the job's rank and size (from {})", world.launcher),
                    value: format!("rank {} of {}", world.rank, world.size),
                    expected: format!(
                        "MPI's own, rank {rank} of {size}: start MPI jobs with mpirun (or srun), or choose another transport with HVD_BACKEND"
                    ),
                });
            }
            Ok(Box::new(mpi))
        }
        Backend::Nccl => Err(Error::Unsupported {
            backend: "nccl",
            what: "host tensors: connect the host transport (Backend::host) and NCCL beside \
                   it (connect_device)"
                .into(),
        }),
        #[allow(unreachable_patterns)]
        other => Err(Error::Unsupported {
            backend: other.name(),
            what: "this build (its Cargo feature is off)".into(),
        }),
    }
}

/// The first provider, in hvd-rdma's order of preference, that reaches other hosts
/// (`shm` stays on one).
#[cfg(feature = "rdma")]
fn provider_between_hosts() -> Result<String> {
    let offered = hvd_rdma::providers()?;
    hvd_rdma::PREFERENCE
        .iter()
        .filter(|p| **p != "shm")
        .find_map(|wanted| {
            offered
                .iter()
                .find(|o| o.name.split(';').next() == Some(*wanted))
                .map(|o| o.name.clone())
        })
        .ok_or_else(|| Error::Config {
            name: "HVD_RDMA_PROVIDER".into(),
            value: "unset".into(),
            expected: format!(
                "a libfabric provider that reaches other hosts; this host offers only: {}",
                offered
                    .iter()
                    .map(|o| o.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// Host staging for device tensors no transport takes (feature `nccl`): their memory
/// through the CUDA driver, each device's with a stream of its own, made on first use
/// (a job with no device tensors never loads the driver). `None` without the feature.
pub fn staging() -> Option<hvd_runtime::DeviceMemoryFor> {
    #[cfg(feature = "nccl")]
    {
        let rank = World::from_env_without_store().map_or(0, |w| w.rank);
        Some(std::sync::Arc::new(move |device| match device {
            hvd_core::Device::Cuda(ordinal) => {
                let config = hvd_nccl::NcclConfig::from_env()?;
                let memory: std::sync::Arc<dyn hvd_core::DeviceMemory> =
                    hvd_nccl::CudaMemory::new(&config, ordinal, rank)?;
                Ok(memory)
            }
            other => Err(Error::Unsupported {
                backend: "hvd",
                what: format!("staging {other} memory through the host"),
            }),
        }))
    }
    #[cfg(not(feature = "nccl"))]
    None
}
