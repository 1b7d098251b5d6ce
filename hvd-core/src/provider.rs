//! What a transport crate offers the facade that puts a job's stack together: its name,
//! whether it can run here, how it connects a rank, and what it reports about a host.
//!
//! The facade (`hvd`) keeps the list of the [`Provider`]s compiled in, and chooses,
//! connects and diagnoses by asking them, so that it holds no code of its own per
//! transport. A new transport implements `Provider` beside its `Collective` and adds one
//! line to that list.

use std::sync::Arc;

use crate::{Collective, Device, DeviceMemory, Result, Store, Topology};

/// This process's place in a job, as a transport connecting it needs it. The facade's
/// `World` is one; the ranks of one host, for a hierarchy, are another.
pub trait Place {
    /// This rank, from 0.
    fn rank(&self) -> usize;
    /// How many ranks the job has.
    fn size(&self) -> usize;
    /// The store the ranks rendezvous through.
    fn store(&self) -> Arc<dyn Store>;
    /// Which launcher's variables gave the rank and size (`hvdrun`, `Open MPI`, ...),
    /// for errors that name where a number came from.
    fn launcher(&self) -> &'static str;
    /// True when an MPI launcher (Open MPI's or MPICH's mpirun) started this process.
    fn launched_by_mpi(&self) -> bool;
    /// Whether every rank is on this host, as far as the launcher says.
    fn on_one_host(&self) -> Result<bool>;
}

/// Which memory a transport carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carries {
    /// Host tensors and the runtime's negotiation: a job has exactly one.
    Host,
    /// Device tensors, beside the host transport (NCCL for CUDA memory).
    Device,
}

/// Memory of a device with a stream of its own, made when first asked for.
pub type MemoryFor = Arc<dyn Fn(Device) -> Result<Arc<dyn DeviceMemory>> + Send + Sync>;

/// A transport, as the facade sees it before connecting it.
pub trait Provider: Sync {
    /// The name a job chooses it by (`HVD_BACKEND=tcp`), as its `Collective::backend`.
    fn name(&self) -> &'static str;

    /// Other names that choose it (Horovod's `gloo` for TCP).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// Which memory it carries.
    fn carries(&self) -> Carries {
        Carries::Host
    }

    /// Whether its ranks meet through the rendezvous store; MPI's meet through their
    /// launcher, so a job on MPI needs none.
    fn rendezvous(&self) -> bool {
        true
    }

    /// Whether a job that names no transport should use this one (MPI under mpirun,
    /// shared memory when every rank is on this host). The facade asks in its list's
    /// order and takes the first that claims the job, else the first host transport.
    fn claims(&self, place: &dyn Place) -> Result<bool> {
        let _ = place;
        Ok(false)
    }

    /// Whether it connects the ranks of one host for a hierarchical allreduce.
    fn within_host(&self) -> bool {
        false
    }

    /// Whether, across hosts, the facade should run it as the flat group of a hierarchy
    /// (a `within_host` transport inside each host, this one across).
    fn under_hierarchy(&self) -> bool {
        false
    }

    /// What it is built on, with the library's version where it has one; an error
    /// naming the library when it cannot be loaded here.
    fn library(&self) -> Result<String>;

    /// What this host offers it, in lines (`hvdrun --check` prints them); `None` when
    /// there is nothing to say beyond [`library`](Provider::library).
    fn report(&self) -> Option<Vec<String>> {
        None
    }

    /// Connects this rank of `place`. A host transport gets `beside: None`; a device
    /// transport gets the topology of the host transport it runs beside.
    fn connect(&self, place: &dyn Place, beside: Option<&Topology>) -> Result<Box<dyn Collective>>;

    /// Device memory for staging, through host memory, the device tensors that no
    /// transport of the job takes (`rank` names this process in its errors); `None` when
    /// this transport has no device memory to offer.
    fn staging(&self, rank: usize) -> Option<MemoryFor> {
        let _ = rank;
        None
    }
}
