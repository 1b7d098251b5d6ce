//! # hvd-runtime: the engine between a training loop and a transport
//!
//! Named asynchronous collectives, negotiated between ranks by one engine per process
//! set (its cycles run by a caller waiting on a handle, or else by the set's background
//! thread), so ranks may submit tensors in any order: the response cache, the
//! stall inspector, join, process sets, the Timeline and autotuning, over the middleware
//! stack built in `stack.rs` (`Timeline<Fusion<Router>>`).
//!
//! Each engine is two parts: negotiation (`negotiation/`) turns this rank's requests
//! into the responses every rank agreed on, and the executor (`executor.rs`) holds the
//! work, runs the responses and completes every operation. In the cached steady state,
//! small allreduces of a set that repeats ride the negotiation round itself
//! (`speculate.rs`): one collective per step, not two.
//!
//! Each cycle's agreed responses reach the stack as whole batches of typed operations;
//! Fusion alone applies the fusion threshold, and the [`Router`] sends each call to the
//! transport for its tensors' memory. A [`Buffer`] lives on the host or, through its
//! device view, on a device.
//!
//! It depends on the contract ([`hvd_core`]) and the middleware only: [`start`] takes
//! transports already connected. The facade `hvd` chooses and connects the transport from
//! the job's environment and re-exports what is here.

mod autotune;
mod buffer;
mod cache;
mod completion;
mod compress;
mod config;
mod control_errors;
mod drive;
mod engine;
mod executor;
mod expectation;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod handle;
mod negotiation;
mod poll;
mod process_set;
mod queue;
mod request;
mod response;
mod router;
mod run;
mod set_engine;
mod speculate;
mod stack;
mod staging;
mod stall;
mod stats;
mod table;
mod timeline;
mod tuning;
mod wire;
mod work;

use std::ops::Deref;
use std::sync::Arc;

use hvd_core::{Error, Result, Topology, validate};

pub use buffer::{Bools, Buffer, Shaped};
pub use config::Config;
pub use handle::Handle;
/// What [`Stack::build`] records the Timeline into.
pub use hvd_timeline::Recorder;
pub use process_set::ProcessSet;
pub use router::Router;
pub use stack::Stack;
pub use staging::DeviceMemoryFor;
pub use stats::StatsSnapshot;

use set_engine::{Registry, SetEngine};
use timeline::Trace;
use work::SetRegistry;

/// The longest [`Hvd::stop_timeline`] waits for the recorded events to reach the file:
/// two gatherings are 128 cycles, about a quarter of a second at the default cycle time.
pub const STOP_TIMELINE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts the runtime over connected transports (a host one, and device ones routed by
/// `router`): the global set's background thread, then the static process sets
/// `process_sets` (ids 1, 2, ... in this order).
pub fn start(router: Router, config: Config, process_sets: Vec<Vec<usize>>) -> Result<Hvd> {
    let topology = router.host().topology().clone();
    let transport_name = router.host().backend();
    let device_transports = router.device_backends();
    let trace = Arc::new(Trace::default());
    trace.recorder.set_mark_cycles(config.timeline_mark_cycles);
    if let Some(path) = &config.timeline {
        trace.start(topology.rank(), path)?;
    }
    let stack = Stack::routed(router, config.fusion_threshold, &trace.recorder);
    let registry = Arc::new(Registry::new(stack.clone(), config.clone(), trace.clone()));
    let global = SetEngine::start(0, stack, &config, trace.clone())?;
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
            device_transports,
            config,
            global,
            registry,
            trace,
        }),
    };
    for members in process_sets {
        hvd.add_process_set(&members)?;
    }
    Ok(hvd)
}

struct Inner {
    topology: Topology,
    transport: &'static str,
    device_transports: Vec<&'static str>,
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

    /// The device transports beside it (`["nccl"]`); none when device tensors are staged
    /// through host memory.
    pub fn device_transports(&self) -> &[&'static str] {
        &self.inner.device_transports
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
        let id = self
            .global
            .add_set_request(members, timeout, self.registry())?;
        // Another thread may remove the set by its id before this one returns it.
        self.process_set(id).ok_or_else(|| {
            Error::invalid(
                self.rank(),
                "add_process_set",
                format!("process set {id}"),
                "it was removed before add_process_set returned",
            )
        })
    }

    /// Removes a process set; every rank of the job must call it.
    pub fn remove_process_set(&self, set: &ProcessSet) -> Result<()> {
        self.global.remove_set_request(set.id(), self.registry())
    }

    fn registry(&self) -> Arc<dyn SetRegistry> {
        self.inner.registry.clone()
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

    /// Whether the Timeline marks the start of every negotiation cycle (as
    /// `HVD_TIMELINE_MARK_CYCLES=1` does at start); takes effect at once.
    pub fn mark_timeline_cycles(&self, on: bool) {
        self.inner.trace.recorder.set_mark_cycles(on);
    }

    /// Stops recording the Timeline and returns once what was recorded is in rank 0's
    /// file, a complete JSON array (within a few hundred cycles; [`STOP_TIMELINE_WAIT`]
    /// at most, after which it warns and the events follow at the next gathering). Call it
    /// on every rank, as Horovod's `stop_timeline`.
    pub fn stop_timeline(&self) {
        if self.stopped().is_some() {
            self.inner.trace.recorder.stop();
            return;
        }
        if !self.inner.trace.stop(STOP_TIMELINE_WAIT) {
            tracing::warn!(
                "stop_timeline: the Timeline's events were not gathered into the file within {STOP_TIMELINE_WAIT:?}; they follow at the next gathering or at shutdown"
            );
        }
    }

    /// This rank's Timeline recorder as a tracer, for spans of work outside the runtime
    /// (the input pipeline's `DATA_WAIT`); it records only while the Timeline does.
    pub fn tracer(&self) -> Arc<dyn hvd_core::trace::Tracer> {
        self.inner.trace.recorder.clone()
    }

    /// Why the job has ended on this rank, once it has: every call fails with this error
    /// (a rank left or was lost, or the job was shut down). A program may then start a
    /// new job (every rank alike).
    pub fn stopped(&self) -> Option<Error> {
        self.inner.global.queue.stopped()
    }

    /// Leaves the job now: the other ranks' pending and later calls fail with an error
    /// naming this rank. Dropping the last clone of `Hvd` does the same.
    pub fn shutdown(self) {
        self.inner.registry.shutdown_all();
        self.inner.global.shutdown();
    }
}
