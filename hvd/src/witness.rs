//! Ranks as witnesses: a rank that fails because it lost a peer says so in the job's
//! rendezvous store, so the launcher can name the rank that died rather than the first
//! survivor that exited because of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hvd_core::{
    Collective, Device, DeviceMemory, Reduction, Result, Store, Tensor, TensorMut, Topology,
};
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
        if let Err(e) = self
            .store
            .set(&lost_key(self.reporter), peer.to_string().as_bytes())
        {
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

impl Collective for LossWitness {
    fn topology(&self) -> &Topology {
        self.inner.topology()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn supports(&self, device: Device) -> bool {
        self.inner.supports(device)
    }
    fn backend_on(&self, device: Device) -> &'static str {
        self.inner.backend_on(device)
    }
    fn fuses_batches(&self) -> bool {
        self.inner.fuses_batches()
    }
    fn device_memory(&self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        self.inner.device_memory(device)
    }
    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        self.witness(self.inner.allreduce(tensors, reduction))
    }
    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        self.witness(self.inner.broadcast(tensors, root))
    }
    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        self.witness(self.inner.allgather(input, output, counts))
    }
    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        self.witness(self.inner.alltoall(input, send_counts, output, recv_counts))
    }
    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        self.witness(self.inner.reducescatter(input, output, counts, reduction))
    }
    fn barrier(&self) -> Result<()> {
        self.witness(self.inner.barrier())
    }
    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let sub = self.witness(self.inner.split(members))?;
        Ok(sub.map(|inner| {
            let global = members
                .iter()
                .filter_map(|m| self.global.get(*m).copied())
                .collect();
            Box::new(LossWitness {
                inner,
                testimony: self.testimony.clone(),
                global,
            }) as Box<dyn Collective>
        }))
    }
}
