//! The runtime: named asynchronous collectives, negotiated between ranks by one
//! background thread per process set.

mod buffer;
mod cache;
mod config;
mod control_errors;
mod engine;
mod execute;
mod handle;
mod process_set;
mod queue;
mod request;
mod response;
mod set_engine;
mod stall;
mod stats;
mod table;
mod timeline;
mod tuning;
mod wire;

use std::ops::Deref;
use std::sync::Arc;

use hvd_core::{Collective, Error, Result, Topology, validate};

pub use buffer::{Bools, Buffer, Shaped};
pub use config::Config;
pub use handle::Handle;
pub use process_set::ProcessSet;
pub use stats::StatsSnapshot;
#[cfg(fuzzing)]
pub(crate) use wire::Announcement;

use engine::SetRegistry;
use set_engine::{Registry, SetEngine};
use timeline::Trace;

use crate::{Backend, transport};

/// Starts hvd with the configuration and job found in the environment (set by hvdrun,
/// mpirun, Slurm or a torchrun-style launcher; with none, a job of one rank).
pub fn init() -> Result<Hvd> {
    Hvd::builder().build()
}

/// Explicit options for [`Hvd`]; anything not set comes from the environment.
#[derive(Default)]
pub struct Builder {
    config: Option<Config>,
    collective: Option<Arc<dyn Collective>>,
    backend: Option<Backend>,
    process_sets: Vec<Vec<usize>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("config", &self.config)
            .field("backend", &self.backend)
            .field("process_sets", &self.process_sets)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// Uses this configuration instead of reading `HVD_*` variables.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Runs over this already connected collective (a custom transport, or the
    /// in-process reference in tests) instead of connecting one.
    pub fn collective(mut self, collective: impl Collective + 'static) -> Self {
        self.collective = Some(Arc::new(collective));
        self
    }

    /// Connects through this transport instead of the default.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Process sets to create at start (ids 1, 2, ... in this order).
    pub fn process_sets(mut self, sets: Vec<Vec<usize>>) -> Self {
        self.process_sets = sets;
        self
    }

    /// Connects (unless a collective was given), starts the background thread, and
    /// creates the static process sets.
    pub fn build(self) -> Result<Hvd> {
        crate::logging::install()?;
        let config = match self.config {
            Some(config) => config,
            None => Config::from_env()?,
        };
        let transport: Arc<dyn Collective> = match self.collective {
            Some(collective) => collective,
            None => {
                let backend = match self.backend {
                    Some(b) => b,
                    None => Backend::from_env()?,
                };
                let world = transport::world(backend)?;
                Arc::from(transport::connect(backend, &world)?)
            }
        };
        let topology = transport.topology().clone();
        let transport_name = transport.backend();
        let trace = Arc::new(Trace::default());
        trace.recorder.set_mark_cycles(config.timeline_mark_cycles);
        if let Some(path) = &config.timeline {
            trace.start(topology.rank(), path)?;
        }
        let registry = Arc::new(Registry::new(
            transport.clone(),
            config.clone(),
            trace.clone(),
        ));
        let global = SetEngine::start(
            0,
            transport,
            &config,
            Some(registry.clone() as Arc<dyn SetRegistry>),
            trace.clone(),
        )?;
        tracing::debug!(
            rank = topology.rank(),
            size = topology.size(),
            "hvd started\n{config}"
        );
        let hvd = Hvd {
            global: ProcessSet::new(
                0,
                (0..topology.size()).collect(),
                topology.rank(),
                Some(global.clone()),
            ),
            inner: Arc::new(Inner {
                topology,
                transport: transport_name,
                config,
                global,
                registry,
                trace,
            }),
        };
        for members in self.process_sets {
            hvd.add_process_set(&members)?;
        }
        Ok(hvd)
    }
}

struct Inner {
    topology: Topology,
    transport: &'static str,
    config: Config,
    global: Arc<SetEngine>,
    registry: Arc<Registry>,
    trace: Arc<Trace>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.registry.shutdown_all();
        self.global.shutdown();
    }
}

/// A running hvd job, as seen from this rank. Cheap to clone; the job ends on this rank
/// when the last clone is dropped (or at [`Hvd::shutdown`]).
///
/// Derefs to the global [`ProcessSet`], so `hvd.allreduce(...)` runs over every rank.
#[derive(Clone)]
pub struct Hvd {
    global: ProcessSet,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Hvd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hvd")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish_non_exhaustive()
    }
}

impl Deref for Hvd {
    type Target = ProcessSet;

    fn deref(&self) -> &ProcessSet {
        &self.global
    }
}

impl Hvd {
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub fn rank(&self) -> usize {
        self.inner.topology.rank()
    }
    pub fn size(&self) -> usize {
        self.inner.topology.size()
    }
    pub fn local_rank(&self) -> usize {
        self.inner.topology.local_rank()
    }
    pub fn local_size(&self) -> usize {
        self.inner.topology.local_size()
    }
    pub fn cross_rank(&self) -> usize {
        self.inner.topology.cross_rank()
    }
    pub fn cross_size(&self) -> usize {
        self.inner.topology.cross_size()
    }

    /// The transport the job runs on: `"shm"`, `"tcp"`, `"hierarchical"` (shared memory
    /// within hosts, TCP across), `"mpi"`, or a custom one's name.
    pub fn transport(&self) -> &'static str {
        self.inner.transport
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Creates a process set of `members` (global ranks). Every rank of the job must call
    /// it with the same members; non-members get a set they cannot run collectives on.
    pub fn add_process_set(&self, members: &[usize]) -> Result<ProcessSet> {
        self.add_process_set_within(members, None)
    }

    /// Like [`add_process_set`](Self::add_process_set), but fails after `timeout` with an
    /// error naming the call (the addition stays pending until every rank makes it).
    pub fn add_process_set_timeout(
        &self,
        members: &[usize],
        timeout: std::time::Duration,
    ) -> Result<ProcessSet> {
        self.add_process_set_within(members, Some(timeout))
    }

    fn add_process_set_within(
        &self,
        members: &[usize],
        timeout: Option<std::time::Duration>,
    ) -> Result<ProcessSet> {
        validate::members(self.rank(), self.size(), members)?;
        let id = self.global.add_set_request(members, timeout)?;
        self.process_set(id).ok_or_else(|| Error::Shutdown {
            cause: format!("internal error: process set {id} vanished"),
        })
    }

    /// Removes a process set; every rank of the job must call it.
    pub fn remove_process_set(&self, set: &ProcessSet) -> Result<()> {
        self.global.remove_set_request(set.id())
    }

    /// The process set with this id, if it exists.
    pub fn process_set(&self, id: usize) -> Option<ProcessSet> {
        if id == 0 {
            return Some(self.global.clone());
        }
        let (members, engine) = self.inner.registry.get(id)?;
        Some(ProcessSet::new(id, members, self.rank(), engine))
    }

    /// Starts recording the Timeline: a Chrome trace of every rank, written by rank 0 to
    /// `path` (ignored on other ranks). Call it on every rank; `HVD_TIMELINE` does it at
    /// start. Open the file in Perfetto or chrome://tracing.
    pub fn start_timeline(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        self.inner.trace.start(self.rank(), path.as_ref())
    }

    /// Stops recording the Timeline; what was recorded still reaches the file.
    pub fn stop_timeline(&self) {
        self.inner.trace.stop();
    }

    /// Leaves the job now: the other ranks' pending and later calls fail with an error
    /// naming this rank. Dropping the last clone of `Hvd` does the same.
    pub fn shutdown(self) {
        self.inner.registry.shutdown_all();
        self.inner.global.shutdown();
    }
}
