//! The executor: holds what this rank submitted from the moment the engine takes it off
//! the queue until its caller hears back, and is the only part that touches the data.
//! It runs what negotiation agreed through the middleware stack, in the agreed order;
//! loads the small cached allreduces that ride a negotiation round and, once every
//! rank's data has arrived, finishes them; and completes every operation, failed or not.
//!
//! It also records the rows the Timeline shows per tensor outside the stack: `QUEUE`
//! from submission to the start of its collective, and `ALLREDUCE_IN_NEGOTIATION` for a
//! round that carried this rank's data, whether or not the guess held.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use hvd_core::trace::Tracer;
use hvd_core::{Error, Result, kernels};
use hvd_timeline::Recorder;

use super::compress::WireBuffers;
use super::queue::Queue;
use super::request::Name;
use super::response::Response;
use super::run::{self, Item, Items};
use super::speculate::Cargo;
use super::stack::Stack;
use super::stats::Stats;
use super::work::Work;

/// The Timeline span of a tensor that travelled in the negotiation round.
const SPAN: &str = "ALLREDUCE_IN_NEGOTIATION";

/// One process set's executor on this rank.
pub(crate) struct Executor {
    rank: usize,
    /// The ranks of the set, which a speculated average divides by.
    ranks: usize,
    /// The middleware stack every data collective goes down.
    stack: Stack,
    /// Told when a name is done, so it can be submitted again.
    queue: Arc<Queue>,
    stats: Arc<Stats>,
    recorder: Arc<Recorder>,
    /// What this rank submitted and no response has answered yet, by name.
    works: FxHashMap<Name, Work>,
    /// Wire buffers of compressed allreduces, kept for the next batch.
    wire_buffers: WireBuffers,
}

impl Executor {
    pub fn new(
        stack: Stack,
        queue: Arc<Queue>,
        stats: Arc<Stats>,
        recorder: Arc<Recorder>,
    ) -> Executor {
        let topology = stack.transport().topology();
        Executor {
            rank: topology.rank(),
            ranks: topology.size(),
            stack,
            queue,
            stats,
            recorder,
            works: FxHashMap::default(),
            wire_buffers: WireBuffers::default(),
        }
    }

    /// The stack, whose Fusion threshold the engine adjusts.
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// Keeps `work`, the operation on tensor `name`, until a response answers it.
    pub fn hold(&mut self, name: Name, work: Work) {
        self.recorder.queue_begin(&name);
        self.works.insert(name, work);
    }

    /// Takes the work of `names` that this rank submitted: done here, so their names may
    /// be used again before any caller hears back.
    fn claim(&mut self, names: &[&Name]) -> Vec<Option<Work>> {
        let works: Vec<Option<Work>> = names.iter().map(|n| self.works.remove(*n)).collect();
        let mine = names
            .iter()
            .zip(&works)
            .filter(|(_, work)| work.is_some())
            .map(|(name, _)| &***name);
        let completed = self.queue.finished(mine);
        self.stats.completed(completed);
        works
    }

    /// Copies this rank's tensors into `cargo`, prescaled, when it has every one waiting
    /// in host memory of the agreed size; otherwise leaves the cargo zeroed and not ready.
    pub fn load(&mut self, cargo: &mut Cargo) {
        cargo.ready = cargo.all_waiting && self.fill(cargo);
        if cargo.ready {
            for r in &cargo.riders {
                self.recorder.begin(&r.name, SPAN, Default::default());
            }
        }
    }

    fn fill(&mut self, cargo: &mut Cargo) -> bool {
        for r in &cargo.riders {
            let into = &mut cargo.data[r.bytes.clone()];
            let mine = self
                .works
                .get_mut(&r.name)
                .and_then(Work::host_bytes)
                .filter(|bytes| bytes.len() == into.len());
            let Some(bytes) = mine else {
                cargo.data.fill(0);
                return false;
            };
            into.copy_from_slice(bytes);
            kernels::prescale(r.plan.dtype, r.reduction, into);
        }
        true
    }

    /// After the round that carried `cargo`: when every rank's data landed, finishes
    /// each reduction into its caller's tensor and completes it.
    pub fn unload(&mut self, cargo: Cargo) {
        let Cargo {
            riders,
            mut data,
            ready,
            landed,
            ..
        } = cargo;
        if ready {
            riders.iter().for_each(|r| self.recorder.end(&r.name, SPAN));
        }
        if !landed {
            return;
        }
        let names: Vec<&Name> = riders.iter().map(|r| &r.name).collect();
        let works = self.claim(&names);
        for (r, work) in riders.iter().zip(works) {
            self.stats.speculated();
            let result = &mut data[r.bytes.clone()];
            kernels::finish(r.plan.dtype, r.reduction, self.ranks, result);
            let Some(work) = work else {
                continue;
            };
            self.recorder.queue_end(&r.name);
            // Paired and completed as a batch the stack ran (`load` saw the host tensor).
            if let Some(Item::Batched(mut tensor)) =
                Item::new(r.name.clone(), r.plan.clone(), Some(work))
            {
                if let Some(bytes) = tensor.host_bytes() {
                    bytes.copy_from_slice(result);
                }
                tensor.finish(Ok(()));
            }
        }
    }

    /// Runs `responses` in order; consecutive allreduces with one reduction, and
    /// consecutive broadcasts from one root, on one device, go to the stack as one batch
    /// (how a batch travels is Fusion's to decide). Fails the rest after an error.
    pub fn execute(&mut self, responses: Vec<Response>) -> Result<()> {
        let names: Vec<&Name> = responses.iter().map(|r| &r.name).collect();
        let works = self.claim(&names);
        let mut items = Vec::with_capacity(responses.len());
        for (response, work) in responses.into_iter().zip(works) {
            match response.outcome {
                Err(err) => {
                    if let Some(work) = work {
                        work.fail(err);
                    }
                }
                Ok(plan) => items.extend(Item::new(response.name, plan, work)),
            }
        }
        let mut items: Items = items.into_iter().peekable();
        while let Some(item) = items.next() {
            self.recorder.queue_end(item.name());
            let result = match item {
                Item::Resized { name, plan, tensor } => {
                    run::run_resized(&self.stack, self.rank, &name, &plan, tensor)
                }
                Item::Control { plan, control, .. } => run::run_control(self.rank, &plan, control),
                Item::Batched(first) => {
                    let mut batch = vec![first];
                    while let Some(next) = run::next_in_batch(&mut items, &batch[0]) {
                        self.recorder.queue_end(next.name());
                        batch.push(next);
                    }
                    run::run_batch(&self.stack, &mut self.wire_buffers, batch)
                }
            };
            if let Err(err) = result {
                items.for_each(|item| item.fail(err.clone()));
                return Err(err);
            }
        }
        Ok(())
    }

    /// Fails everything still held or queued with `reason`; later submissions fail with
    /// it too.
    pub fn stop(&mut self, reason: Error) {
        let queued = self.queue.stop(reason.clone());
        for submission in queued {
            submission.work.fail(reason.clone());
        }
        for (_, work) in self.works.drain() {
            work.fail(reason.clone());
        }
    }
}
