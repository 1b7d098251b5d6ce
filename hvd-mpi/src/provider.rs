//! The MPI transport as the facade sees it: chosen when an MPI launcher started the job,
//! and meeting its peers through that launcher rather than a rendezvous store.

use hvd_core::provider::{Place, Provider};
use hvd_core::{Collective, Error, Result, Topology};

use crate::{MpiCollective, MpiConfig, library_version};

/// The MPI transport, for the facade's list of transports.
#[derive(Debug, Clone, Copy)]
pub struct MpiProvider;

impl Provider for MpiProvider {
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn rendezvous(&self) -> bool {
        false
    }

    fn claims(&self, place: &dyn Place) -> Result<bool> {
        Ok(place.launched_by_mpi())
    }

    fn library(&self) -> Result<String> {
        library_version()
    }

    fn connect(&self, place: &dyn Place, _: Option<&Topology>) -> Result<Box<dyn Collective>> {
        let mpi = MpiCollective::world(MpiConfig::from_env()?)?;
        let (rank, size) = (mpi.topology().rank(), mpi.topology().size());
        if (rank, size) != (place.rank(), place.size()) {
            return Err(Error::Config {
                name: format!("the job's rank and size (from {})", place.launcher()),
                value: format!("rank {} of {}", place.rank(), place.size()),
                expected: format!(
                    "MPI's own, rank {rank} of {size}: start MPI jobs with mpirun (or srun), or choose another transport with HVD_BACKEND"
                ),
            });
        }
        Ok(Box::new(mpi))
    }
}
