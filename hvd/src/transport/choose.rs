//! Choosing the transport: which backends this build has, and which one a job uses.
//! What each can do comes from its provider (`providers.rs`); this file holds only the
//! rules between them.

use std::fmt;
use std::str::FromStr;

use hvd_core::provider::{Carries, Provider};
use hvd_core::{Error, Result};

use super::providers::providers;
use crate::World;

/// A transport, by the name a job chooses it by (`HVD_BACKEND`). The constants name the
/// transports hvd has; [`Backend::compiled`] says which this build can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backend(&'static str);

// Named like enum variants, so that choosing a transport reads
// `Builder::backend(Backend::Tcp)`; a transport without a constant is found by name.
#[allow(non_upper_case_globals)]
impl Backend {
    /// Pure-Rust TCP (feature `gloo-tcp`, on by default).
    pub const Tcp: Backend = Backend("tcp");
    /// The system's MPI (feature `mpi`), for jobs started by mpirun.
    pub const Mpi: Backend = Backend("mpi");
    /// Shared memory (feature `shm`, on by default), for jobs whose ranks share a host.
    pub const Shm: Backend = Backend("shm");
    /// RDMA-class fabrics through libfabric (feature `rdma`): verbs, EFA, shm, tcp.
    pub const Rdma: Backend = Backend("rdma");
    /// NCCL for tensors in CUDA memory (feature `nccl`), beside the host transport the
    /// other rules pick.
    pub const Nccl: Backend = Backend("nccl");
}

impl Backend {
    /// Every backend compiled into this build.
    pub fn compiled() -> Vec<Backend> {
        providers().iter().map(|p| Backend(p.name())).collect()
    }

    pub fn name(self) -> &'static str {
        self.0
    }

    /// Its provider, when this build has it.
    pub(super) fn provider(self) -> Option<&'static dyn Provider> {
        providers().iter().copied().find(|p| p.name() == self.0)
    }

    /// Its provider, or the error that says this build lacks it.
    pub(super) fn compiled_provider(self) -> Result<&'static dyn Provider> {
        self.provider().ok_or_else(|| Error::Unsupported {
            backend: self.0,
            what: "this build (its Cargo feature is off)".into(),
        })
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn expected_backend() -> String {
    let names: Vec<&str> = providers().iter().map(|p| p.name()).collect();
    format!(
        "one of the backends compiled into this build: {}",
        names.join(", ")
    )
}

impl FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let wanted = s.trim().to_ascii_lowercase();
        providers()
            .iter()
            .find(|p| p.name() == wanted || p.aliases().contains(&wanted.as_str()))
            .map(|p| Backend(p.name()))
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

    /// The transport for host tensors in `world`: this one, or for a device transport
    /// (`nccl`) the one the rules pick without it.
    pub fn host(self, world: &World) -> Result<Backend> {
        match self.provider() {
            Some(p) if p.carries() == Carries::Device => Backend::default_host(world),
            _ => Ok(self),
        }
    }

    /// The host transport when none is named: the first that claims the job (MPI under
    /// mpirun, shared memory on one host), else the first compiled in.
    fn default_host(world: &World) -> Result<Backend> {
        let hosts = || providers().iter().filter(|p| p.carries() == Carries::Host);
        for provider in hosts() {
            if provider.claims(world)? {
                return Ok(Backend(provider.name()));
            }
        }
        hosts()
            .next()
            .map(|p| Backend(p.name()))
            .ok_or_else(|| Error::Config {
                name: "Cargo features".into(),
                value: "no transport".into(),
                expected: "at least one transport feature (gloo-tcp is the default)".into(),
            })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hvd_core::MemoryStore;

    use super::*;

    fn job(launcher: &'static str, local_size: Option<usize>) -> World {
        World {
            rank: 0,
            size: 2,
            launcher,
            store: Arc::new(MemoryStore::new()),
            local_size,
        }
    }

    #[test]
    fn every_compiled_backend_is_chosen_by_its_name_and_aliases() {
        for backend in Backend::compiled() {
            assert_eq!(backend.name().parse::<Backend>().unwrap(), backend);
            let shouted = format!(" {} ", backend.name().to_ascii_uppercase());
            assert_eq!(shouted.parse::<Backend>().unwrap(), backend);
        }
        if cfg!(feature = "gloo-tcp") {
            assert_eq!("gloo".parse::<Backend>().unwrap(), Backend::Tcp);
        }
    }

    #[test]
    fn an_unknown_name_is_refused_naming_the_compiled_backends() {
        let names: Vec<&str> = Backend::compiled().iter().map(|b| b.name()).collect();
        let error = "carrier-pigeon".parse::<Backend>().unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "invalid value \"carrier-pigeon\" for backend: expected one of the backends \
                 compiled into this build: {}",
                names.join(", ")
            )
        );
    }

    #[test]
    #[cfg_attr(
        not(any(feature = "mpi", feature = "shm", feature = "gloo-tcp")),
        ignore = "no host transport compiled in"
    )]
    fn a_job_that_names_none_gets_the_first_transport_that_claims_it() {
        if cfg!(feature = "mpi") {
            assert_eq!(
                Backend::default_host(&job("Open MPI", Some(2))).unwrap(),
                Backend::Mpi
            );
        }
        if cfg!(feature = "shm") {
            assert_eq!(
                Backend::default_host(&job("hvdrun", Some(2))).unwrap(),
                Backend::Shm
            );
        }
        if cfg!(feature = "gloo-tcp") {
            // Not known to share a host: none claims it, and the first compiled runs it.
            assert_eq!(
                Backend::default_host(&job("hvdrun", None)).unwrap(),
                Backend::Tcp
            );
        }
    }

    #[test]
    fn a_device_transport_runs_beside_the_host_transport_the_rules_pick() {
        let world = job("hvdrun", None);
        let host = Backend::default_host(&world).unwrap();
        assert_eq!(Backend::Tcp.host(&world).unwrap(), Backend::Tcp);
        if cfg!(feature = "nccl") {
            assert_eq!(Backend::Nccl.host(&world).unwrap(), host);
        }
    }

    #[test]
    fn a_backend_this_build_lacks_says_its_feature_is_off() {
        // No build has it: the same as Backend::Mpi in a build without the mpi feature.
        let lacking = Backend("carrier-pigeon");
        let off = "carrier-pigeon transport does not support this build (its Cargo feature is off)";
        assert_eq!(lacking.library().unwrap_err().to_string(), off);
        let world = job("hvdrun", None);
        let refused = super::super::connect(lacking, &world)
            .err()
            .expect("refused");
        assert_eq!(refused.to_string(), off);
        assert_eq!(lacking.report(), None);
    }
}
