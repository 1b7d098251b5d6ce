//! Choosing and connecting a transport: the one place that knows every backend.
//!
//! Which transport a job uses, in order: the builder's
//! [`Builder::backend`](crate::Builder::backend); else `HVD_BACKEND` (alias
//! `HOROVOD_CPU_OPERATIONS`); else MPI when the `mpi` feature is compiled in and mpirun
//! started the process; else shared memory (feature `shm`, on by default) when the
//! launcher says every rank is on this host; else the first compiled in (TCP).
//!
//! `nccl` (feature `nccl`) is a transport for device memory: with it, tensors in CUDA
//! memory go over NCCL, and host tensors and negotiation over the transport the same
//! rules pick without it.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hvd_core::{Collective, Error, PrefixStore, Result};

use crate::World;
use crate::witness::LossWitness;

/// The transports this build of hvd can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Pure-Rust TCP (feature `gloo-tcp`, on by default).
    Tcp,
    /// The system's MPI (feature `mpi`), for jobs started by mpirun.
    Mpi,
    /// Shared memory (feature `shm`, on by default), for jobs whose ranks share a host.
    Shm,
    /// RDMA-class fabrics through libfabric (feature `rdma`): verbs, EFA, shm, tcp.
    Rdma,
    /// NCCL for tensors in CUDA memory (feature `nccl`), beside the host transport the
    /// other rules pick.
    Nccl,
}

impl Backend {
    /// Every backend compiled into this build.
    pub fn compiled() -> Vec<Backend> {
        let mut backends = Vec::new();
        if cfg!(feature = "gloo-tcp") {
            backends.push(Backend::Tcp);
        }
        if cfg!(feature = "mpi") {
            backends.push(Backend::Mpi);
        }
        if cfg!(feature = "shm") {
            backends.push(Backend::Shm);
        }
        if cfg!(feature = "rdma") {
            backends.push(Backend::Rdma);
        }
        if cfg!(feature = "nccl") {
            backends.push(Backend::Nccl);
        }
        backends
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Tcp => "tcp",
            Backend::Mpi => "mpi",
            Backend::Shm => "shm",
            Backend::Rdma => "rdma",
            Backend::Nccl => "nccl",
        }
    }

    /// What the transport is built on, with the library's version where it has one;
    /// an error when its library cannot be found at run time.
    pub fn library(self) -> Result<String> {
        match self {
            Backend::Tcp => Ok("pure Rust sockets (no system library)".into()),
            Backend::Shm => Ok("pure Rust shared memory in /dev/shm (no system library)".into()),
            #[cfg(feature = "mpi")]
            Backend::Mpi => hvd_mpi::library_version(),
            #[cfg(feature = "rdma")]
            Backend::Rdma => Ok(format!(
                "libfabric, providers: {}",
                provider_names(&hvd_rdma::providers()?)
            )),
            #[cfg(feature = "nccl")]
            Backend::Nccl => hvd_nccl::describe(&hvd_nccl::NcclConfig::from_env()?),
            #[allow(unreachable_patterns)]
            other => Err(Error::Unsupported {
                backend: other.name(),
                what: "this build (its Cargo feature is off)".into(),
            }),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn expected_backend() -> String {
    let names: Vec<&str> = Backend::compiled().iter().map(|b| b.name()).collect();
    format!(
        "one of the backends compiled into this build: {}",
        names.join(", ")
    )
}

impl FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let wanted = s.trim().to_ascii_lowercase();
        Backend::compiled()
            .into_iter()
            .find(|b| b.name() == wanted || (wanted == "gloo" && *b == Backend::Tcp))
            .ok_or_else(|| Error::Config {
                name: "backend".into(),
                value: s.into(),
                expected: expected_backend(),
            })
    }
}

impl Backend {
    /// The backend for the job the launcher's environment describes: see
    /// [`Backend::for_world`].
    pub fn from_env() -> Result<Backend> {
        Backend::for_world(&World::from_env_without_store()?)
    }

    /// The backend named by `HVD_BACKEND` (alias `HOROVOD_CPU_OPERATIONS`); else MPI when
    /// it is compiled in and an MPI launcher started `world`; else shared memory when
    /// every rank of `world` is on this host; else the first compiled in.
    pub fn for_world(world: &World) -> Result<Backend> {
        match Backend::named()? {
            Some(backend) => Ok(backend),
            None => Backend::default_host(world),
        }
    }

    /// The backend `HVD_BACKEND` (alias `HOROVOD_CPU_OPERATIONS`) names, if either is set.
    pub fn named() -> Result<Option<Backend>> {
        let named = hvd_core::env::parse_first::<Backend, _>(
            &["HVD_BACKEND", "HOROVOD_CPU_OPERATIONS"],
            &expected_backend(),
        )?;
        Ok(named.map(|(_, backend)| backend))
    }

    /// The transport for host tensors in `world`: this one, or for `nccl` (a device
    /// transport) the one the rules pick without it.
    pub fn host(self, world: &World) -> Result<Backend> {
        match self {
            Backend::Nccl => Backend::default_host(world),
            host => Ok(host),
        }
    }

    /// The host transport when none is named: MPI under mpirun, shared memory on one
    /// host, else the first compiled in.
    fn default_host(world: &World) -> Result<Backend> {
        let compiled: Vec<Backend> = Backend::compiled()
            .into_iter()
            .filter(|b| *b != Backend::Nccl)
            .collect();
        if compiled.contains(&Backend::Mpi) && world.launched_by_mpi() {
            return Ok(Backend::Mpi);
        }
        if compiled.contains(&Backend::Shm) && world.on_one_host()? {
            return Ok(Backend::Shm);
        }
        compiled.first().copied().ok_or_else(|| Error::Config {
            name: "Cargo features".into(),
            value: "no transport".into(),
            expected: "at least one transport feature (gloo-tcp is the default)".into(),
        })
    }
}

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

/// What this host offers the RDMA transport, in lines: libfabric's providers and the
/// RDMA devices with their ports, or why there are none (`hvdrun --check` prints it).
/// `None` in a build without the `rdma` feature.
pub fn rdma_report() -> Option<Vec<String>> {
    #[cfg(feature = "rdma")]
    {
        let providers = match hvd_rdma::providers() {
            Ok(list) if list.is_empty() => "libfabric providers: none".to_string(),
            Ok(list) => format!("libfabric providers: {}", provider_domains(&list)),
            Err(e) => format!("libfabric providers: {e}"),
        };
        let devices = match hvd_rdma::devices() {
            Ok(list) if list.is_empty() => vec!["RDMA devices: none".to_string()],
            Ok(list) => list
                .iter()
                .flat_map(|d| {
                    let ports: Vec<String> =
                        d.ports.iter().map(|p| format!("{}: {p}", d.name)).collect();
                    ports
                })
                .map(|port| format!("RDMA device {port}"))
                .collect(),
            Err(e) => vec![e.to_string()],
        };
        let mut lines = vec![providers];
        lines.extend(devices);
        Some(lines)
    }
    #[cfg(not(feature = "rdma"))]
    None
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

/// What this host offers NCCL jobs: the NCCL and CUDA driver versions and the GPUs, or
/// why it cannot run one (`hvdrun --check` prints it). `None` in a build without the
/// `nccl` feature.
pub fn nccl_report() -> Option<String> {
    #[cfg(feature = "nccl")]
    {
        let described = hvd_nccl::NcclConfig::from_env().and_then(|c| hvd_nccl::describe(&c));
        Some(described.unwrap_or_else(|e| e.to_string()))
    }
    #[cfg(not(feature = "nccl"))]
    None
}

/// Provider names, each once, in libfabric's order.
#[cfg(feature = "rdma")]
fn provider_names(providers: &[hvd_rdma::Provider]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for p in providers {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    names.join(", ")
}

/// Each provider once, with the domains (NICs, interfaces) it offers:
/// `tcp;ofi_rxm (eth0, lo), shm`.
#[cfg(feature = "rdma")]
fn provider_domains(providers: &[hvd_rdma::Provider]) -> String {
    let mut grouped: Vec<(&str, Vec<&str>)> = Vec::new();
    for p in providers {
        let at = match grouped.iter().position(|(name, _)| *name == p.name) {
            Some(at) => at,
            None => {
                grouped.push((&p.name, Vec::new()));
                grouped.len() - 1
            }
        };
        let domains = &mut grouped[at].1;
        if p.domain != p.name && !domains.contains(&p.domain.as_str()) {
            domains.push(&p.domain);
        }
    }
    let shown: Vec<String> = grouped
        .into_iter()
        .map(|(name, domains)| match domains.as_slice() {
            [] => name.to_string(),
            _ => format!("{name} ({})", domains.join(", ")),
        })
        .collect();
    shown.join(", ")
}
