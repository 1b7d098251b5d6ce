//! The RDMA transport as the facade sees it (a transport provider, not one of
//! libfabric's providers, which `info.rs` lists): the flat group of a hierarchy across
//! hosts, and what a host's libfabric and RDMA devices offer it.

use hvd_core::provider::{Place, Provider};
use hvd_core::{Collective, Error, Result, Topology};

use crate::info::{self, PREFERENCE};
use crate::{RdmaCollective, RdmaConfig, devices};

/// The libfabric transport, for the facade's list of transports.
#[derive(Debug, Clone, Copy)]
pub struct RdmaProvider;

impl Provider for RdmaProvider {
    fn name(&self) -> &'static str {
        "rdma"
    }

    fn under_hierarchy(&self) -> bool {
        true
    }

    fn library(&self) -> Result<String> {
        Ok(format!(
            "libfabric, providers: {}",
            provider_names(&info::providers()?)
        ))
    }

    /// libfabric's providers and the RDMA devices with their ports, or why there are
    /// none.
    fn report(&self) -> Option<Vec<String>> {
        let providers = match info::providers() {
            Ok(list) if list.is_empty() => "libfabric providers: none".to_string(),
            Ok(list) => format!("libfabric providers: {}", provider_domains(&list)),
            Err(e) => format!("libfabric providers: {e}"),
        };
        let devices = match devices() {
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

    fn connect(&self, place: &dyn Place, _: Option<&Topology>) -> Result<Box<dyn Collective>> {
        let mut config = RdmaConfig::from_env()?;
        if config.provider.is_none() && !place.on_one_host()? {
            config.provider = Some(provider_between_hosts()?);
        }
        let rdma = RdmaCollective::connect(place.store(), place.rank(), place.size(), config)?;
        Ok(Box::new(rdma))
    }
}

/// The first provider, in the order of preference, that reaches other hosts (`shm`
/// stays on one).
fn provider_between_hosts() -> Result<String> {
    let offered = info::providers()?;
    PREFERENCE
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

/// Provider names, each once, in libfabric's order.
fn provider_names(providers: &[info::Provider]) -> String {
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
fn provider_domains(providers: &[info::Provider]) -> String {
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
