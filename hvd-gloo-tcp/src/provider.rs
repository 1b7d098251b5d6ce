//! The TCP transport as the facade sees it: chosen by `tcp` (or Horovod's `gloo`),
//! the first host transport when none claims the job, and the flat group of a hierarchy
//! across hosts.

use hvd_core::provider::{Place, Provider};
use hvd_core::{Collective, Result, Topology};

use crate::{TcpCollective, TcpConfig};

/// The pure-Rust TCP transport, for the facade's list of transports.
#[derive(Debug, Clone, Copy)]
pub struct TcpProvider;

impl Provider for TcpProvider {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["gloo"]
    }

    fn under_hierarchy(&self) -> bool {
        true
    }

    fn library(&self) -> Result<String> {
        Ok("pure Rust sockets (no system library)".into())
    }

    fn connect(&self, place: &dyn Place, _: Option<&Topology>) -> Result<Box<dyn Collective>> {
        let config = TcpConfig::from_env()?;
        let tcp = TcpCollective::connect(place.store(), place.rank(), place.size(), config)?;
        Ok(Box::new(tcp))
    }
}
