//! Ranks as witnesses: a rank that fails because it lost a peer says so in the job's
//! rendezvous store, so the launcher can name the rank that died rather than the first
//! survivor that exited because of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hvd_core::driver::blame;
use hvd_core::layer::Layer;
use hvd_core::{Collective, Operation, Result, Store};
use hvd_rendezvous::lost_key;

/// What every witness of one rank shares: the store, and whether it has spoken.
struct Testimony {
    store: Arc<dyn Store>,
    /// This rank's global rank.
    reporter: usize,
    given: AtomicBool,
}

impl Testimony {
    /// Posts the first lost peer this rank sees; later ones are consequences of it.
    fn give(&self, peer: usize) {
        if self.given.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Err(e) = blame::post_rank(self.store.as_ref(), &lost_key(self.reporter), peer) {
            tracing::debug!(
                rank = self.reporter,
                "could not tell the launcher that rank {peer} was lost: {e}"
            );
        }
    }
}

/// A collective that reports lost peers to the launcher, as global ranks.
pub(crate) struct LossWitness {
    inner: Box<dyn Collective>,
    testimony: Arc<Testimony>,
    /// The global rank of each rank of `inner` (a process set's members).
    global: Arc<[usize]>,
}

impl LossWitness {
    /// Wraps the job's own collective, whose ranks are global ranks.
    pub(crate) fn new(inner: Box<dyn Collective>, store: Arc<dyn Store>) -> Self {
        let topology = inner.topology();
        let global: Arc<[usize]> = (0..topology.size()).collect();
        let reporter = topology.rank();
        LossWitness {
            inner,
            testimony: Arc::new(Testimony {
                store,
                reporter,
                given: AtomicBool::new(false),
            }),
            global,
        }
    }

    fn witness<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result
            && let Some(peer) = e.lost_peer()
            && let Some(&global) = self.global.get(peer)
        {
            self.testimony.give(global);
        }
        result
    }
}

impl Layer for LossWitness {
    type Inner = dyn Collective;

    fn inner(&self) -> &(dyn Collective + 'static) {
        self.inner.as_ref()
    }

    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        self.witness(op.run(self.inner.as_ref()))
    }

    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let sub = this.witness(this.inner.split(members))?;
        Ok(sub.map(|inner| {
            let global = members
                .iter()
                .filter_map(|m| this.global.get(*m).copied())
                .collect();
            Box::new(LossWitness {
                inner,
                testimony: this.testimony.clone(),
                global,
            }) as Box<dyn Collective>
        }))
    }
}
