//! Choosing the transport: which backends this build has, and which one a job uses.

use std::fmt;
use std::str::FromStr;

use hvd_core::{Error, Result};

use crate::World;

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
