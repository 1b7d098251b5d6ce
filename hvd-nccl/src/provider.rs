//! NCCL as the facade sees it: a transport for CUDA memory beside the job's host
//! transport, and the memory that stages other device tensors through the host.

use std::sync::Arc;

use hvd_core::provider::{Carries, MemoryFor, Place, Provider};
use hvd_core::{Collective, Device, DeviceMemory, Error, Result, Topology};

use crate::{CudaMemory, NcclCollective, NcclConfig, describe};

/// NCCL, for the facade's list of transports.
#[derive(Debug, Clone, Copy)]
pub struct NcclProvider;

impl Provider for NcclProvider {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn carries(&self) -> Carries {
        Carries::Device
    }

    fn library(&self) -> Result<String> {
        describe(&NcclConfig::from_env()?)
    }

    /// The NCCL and CUDA driver versions and the GPUs, or why this host cannot run NCCL.
    fn report(&self) -> Option<Vec<String>> {
        let described = NcclConfig::from_env().and_then(|c| describe(&c));
        Some(vec![described.unwrap_or_else(|e| e.to_string())])
    }

    fn connect(&self, place: &dyn Place, beside: Option<&Topology>) -> Result<Box<dyn Collective>> {
        let Some(topology) = beside else {
            return Err(Error::Unsupported {
                backend: "nccl",
                what: "host tensors: NCCL connects beside a host transport".into(),
            });
        };
        let config = NcclConfig::from_env()?;
        let nccl = NcclCollective::connect(place.store(), topology.clone(), config)?;
        Ok(Box::new(nccl))
    }

    /// Each CUDA device's memory through the CUDA driver, with a stream of its own, made
    /// on first use (a job with no device tensors never loads the driver).
    fn staging(&self, rank: usize) -> Option<MemoryFor> {
        Some(Arc::new(move |device| match device {
            Device::Cuda(ordinal) => {
                let config = NcclConfig::from_env()?;
                let memory: Arc<dyn DeviceMemory> = CudaMemory::new(&config, ordinal, rank)?;
                Ok(memory)
            }
            other => Err(Error::Unsupported {
                backend: "hvd",
                what: format!("staging {other} memory through the host"),
            }),
        }))
    }
}
