//! The shared-memory transport as the facade sees it: chosen when every rank is on this
//! host, and the transport within each host of a hierarchy.

use hvd_core::provider::{Place, Provider};
use hvd_core::{Collective, Result, Topology};

use crate::{ShmCollective, ShmConfig};

/// The shared-memory transport, for the facade's list of transports.
#[derive(Debug, Clone, Copy)]
pub struct ShmProvider;

impl Provider for ShmProvider {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn claims(&self, place: &dyn Place) -> Result<bool> {
        place.on_one_host()
    }

    fn within_host(&self) -> bool {
        true
    }

    fn library(&self) -> Result<String> {
        Ok("pure Rust shared memory in /dev/shm (no system library)".into())
    }

    fn connect(&self, place: &dyn Place, _: Option<&Topology>) -> Result<Box<dyn Collective>> {
        let config = ShmConfig::from_env()?;
        let shm = ShmCollective::connect(place.store(), place.rank(), place.size(), config)?;
        Ok(Box::new(shm))
    }
}
