//! Choosing and connecting a transport: the one place that knows every backend.

use std::fmt;
use std::str::FromStr;

use hvd_core::{Collective, Error, Result};

use crate::World;

/// The transports this build of hvd can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Pure-Rust TCP (feature `gloo-tcp`, on by default).
    Tcp,
}

impl Backend {
    /// Every backend compiled into this build.
    pub fn compiled() -> Vec<Backend> {
        let mut backends = Vec::new();
        if cfg!(feature = "gloo-tcp") {
            backends.push(Backend::Tcp);
        }
        backends
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Tcp => "tcp",
        }
    }

    /// What the transport is built on, with the library's version where it has one;
    /// an error when its library cannot be found at run time.
    pub fn library(self) -> Result<String> {
        match self {
            Backend::Tcp => Ok("pure Rust sockets (no system library)".into()),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let compiled = Backend::compiled();
        compiled
            .iter()
            .copied()
            .find(|b| b.name() == s.to_ascii_lowercase() || (s == "gloo" && *b == Backend::Tcp))
            .ok_or_else(|| Error::Config {
                name: "backend".into(),
                value: s.into(),
                expected: format!(
                    "one of the backends compiled into this build: {}",
                    compiled
                        .iter()
                        .map(|b| b.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

impl Backend {
    /// The backend named by `HVD_BACKEND` (alias `HOROVOD_CPU_OPERATIONS`), else the first
    /// compiled in.
    pub fn from_env() -> Result<Backend> {
        match crate::env::first_set(&["HVD_BACKEND", "HOROVOD_CPU_OPERATIONS"]) {
            Some((name, value)) => value.parse().map_err(|_| Error::Config {
                name,
                value,
                expected: format!(
                    "one of the backends compiled into this build: {}",
                    Backend::compiled()
                        .iter()
                        .map(|b| b.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
            None => Backend::compiled()
                .first()
                .copied()
                .ok_or_else(|| Error::Config {
                    name: "Cargo features".into(),
                    value: "no transport".into(),
                    expected: "at least one transport feature (gloo-tcp is the default)".into(),
                }),
        }
    }
}

/// Connects this rank of `world` through `backend`.
pub fn connect(backend: Backend, world: &World) -> Result<Box<dyn Collective>> {
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
            Ok(Box::new(tcp))
        }
        #[allow(unreachable_patterns)]
        other => Err(Error::Unsupported {
            backend: other.name(),
            what: "this build (its Cargo feature is off)".into(),
        }),
    }
}
