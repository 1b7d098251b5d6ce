//! Diagnosing a host: what each transport is built on and what the machine offers it,
//! for `hvdrun --check` and for errors.

use hvd_core::{Error, Result};

use super::Backend;

impl Backend {
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
