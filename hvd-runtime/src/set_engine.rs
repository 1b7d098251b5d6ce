//! One process set's engine as the rest of the runtime sees it: its queue, counters and
//! background thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use hvd_core::{Compression, Error, Result, Topology};

use super::config::Config;
use super::drive::Driver;
use super::engine::{Engine, EngineParts};
use super::queue::Queue;
use super::stack::Stack;
use super::stats::Stats;
use super::timeline::Trace;
use super::tuning::Tuning;
use super::work::SetRegistry;

/// A running engine of a process set this rank belongs to.
pub(crate) struct SetEngine {
    pub topology: Topology,
    pub queue: Arc<Queue>,
    pub stats: Arc<Stats>,
    /// How allreduces that do not say otherwise send float tensors.
    pub compression: Compression,
    /// Numbers barriers, which have no name of their own.
    pub barriers: AtomicU64,
    /// Numbers process-set additions, which every rank makes in the same order: a name
    /// made of the count (not the members) lets ranks that pass different members meet
    /// and be told so.
    pub set_additions: AtomicU64,
    /// Whether the stack can copy device tensors to the host and back, so that Adasum,
    /// which combines on the host, takes them.
    pub copies_devices: bool,
    /// Set when the process set was removed: later calls say so.
    pub removed: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Steps the engine: its background thread, or a caller waiting on a handle.
    pub driver: Arc<Driver>,
}

impl SetEngine {
    /// Starts the background thread of the process set `id` over `stack`.
    pub fn start(
        id: usize,
        stack: Stack,
        config: &Config,
        trace: Arc<Trace>,
    ) -> Result<Arc<SetEngine>> {
        let queue = Arc::new(Queue::default());
        let stats = Arc::new(Stats::default());
        let topology = stack.transport().topology().clone();
        let rank = topology.rank();
        let copies_devices = stack.copies_devices();
        // Only the global set tunes: its threshold and cycle are the ones that matter.
        let tuning = if id == 0 {
            Tuning::new(rank, config)?
        } else {
            None
        };
        let engine = Engine::new(EngineParts {
            stack,
            queue: queue.clone(),
            config: config.clone(),
            stats: stats.clone(),
            global: id == 0,
            tuning,
            trace,
        });
        let driver = Arc::new(Driver::new(engine, queue.clone()));
        let background = driver.clone();
        let thread = std::thread::Builder::new()
            .name(format!("hvd-set{id}-rank{rank}"))
            .spawn(move || background.run_background())
            .map_err(|e| Error::io("starting the hvd background thread", &e))?;
        Ok(Arc::new(SetEngine {
            topology,
            queue,
            stats,
            compression: config.compression,
            barriers: AtomicU64::new(0),
            set_additions: AtomicU64::new(0),
            copies_devices,
            removed: AtomicBool::new(false),
            thread: Mutex::new(Some(thread)),
            driver,
        }))
    }

    /// Leaves the job: the other ranks' engines stop in the same cycle. Waits for the
    /// background thread to finish.
    pub fn shutdown(&self) {
        self.queue.request_shutdown();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// A process set's members, and this rank's engine for it (`None` for non-members).
type SetEntry = (Vec<usize>, Option<Arc<SetEngine>>);

/// The process sets of this rank, and how new ones are made.
pub(crate) struct Registry {
    /// The job's stack, which process sets' stacks are split from.
    stack: Stack,
    config: Config,
    trace: Arc<Trace>,
    next_id: AtomicUsize,
    /// Every set (this rank's engine, or `None` where it is not a member) by id.
    sets: Mutex<BTreeMap<usize, SetEntry>>,
}

impl Registry {
    pub fn new(stack: Stack, config: Config, trace: Arc<Trace>) -> Self {
        Registry {
            stack,
            config,
            trace,
            next_id: AtomicUsize::new(1),
            sets: Mutex::new(BTreeMap::new()),
        }
    }

    /// The members and (for members) the engine of set `id`.
    pub fn get(&self, id: usize) -> Option<SetEntry> {
        self.sets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    /// Stops every set's engine.
    pub fn shutdown_all(&self) {
        let sets = std::mem::take(&mut *self.sets.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, (_, engine)) in sets {
            if let Some(engine) = engine {
                engine.shutdown();
            }
        }
    }
}

impl SetRegistry for Registry {
    fn add(&self, members: &[usize]) -> Result<usize> {
        // Ids are handed out in the order the global engine runs additions, which is the
        // same on every rank.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let engine = match self.stack.split(members)? {
            Some(sub) => Some(SetEngine::start(id, sub, &self.config, self.trace.clone())?),
            None => None,
        };
        self.sets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (members.to_vec(), engine));
        Ok(id)
    }

    fn remove(&self, id: usize) -> Result<()> {
        let removed = self
            .sets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        match removed {
            Some((_, engine)) => {
                if let Some(engine) = engine {
                    engine.removed.store(true, Ordering::Relaxed);
                    engine.shutdown();
                }
                Ok(())
            }
            None => Err(Error::invalid(
                self.stack.transport().topology().rank(),
                "remove_process_set",
                format!("process set {id}"),
                "no such process set",
            )),
        }
    }
}
