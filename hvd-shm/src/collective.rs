//! `ShmCollective`: the `Collective` trait over the steps of a shared-memory group.

use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use hvd_core::driver::{Calls, Group, check_rank};
use hvd_core::schedule::blocks;
use hvd_core::{
    Collective, Device, Error, OpKind, Reduction, Result, Store, Tensor, TensorMut, Topology,
    batch_name, validate,
};

use crate::allreduce::{self, Part};
use crate::config::ShmConfig;
use crate::layout::MAX_RANKS;
use crate::lockstep::{Desc, Lockstep, Patience};
use crate::op::{Call, Op};
use crate::rendezvous::Joiner;
use crate::{movement, reducescatter};

/// Store namespace of a group made by [`ShmCollective::connect`].
const ROOT_PREFIX: &str = "shm";

/// One rank's member of a group that communicates through shared memory. See the
/// [crate docs](crate).
pub struct ShmCollective {
    topology: Topology,
    config: ShmConfig,
    store: Arc<dyn Store>,
    /// Store namespace of this group; sub-groups live below it.
    prefix: String,
    group: Group<Lockstep>,
}

impl std::fmt::Debug for ShmCollective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmCollective")
            .field("topology", &self.topology)
            .field("prefix", &self.prefix)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ShmCollective {
    /// Joins the group of `size` ranks on this host as `rank`. Rank 0 creates the
    /// segment and publishes its name in `store`; the others attach. Returns once every
    /// rank has attached, or fails after `config.start_timeout` naming the ranks that
    /// never did.
    pub fn connect(
        store: Arc<dyn Store>,
        rank: usize,
        size: usize,
        config: ShmConfig,
    ) -> Result<ShmCollective> {
        Self::join(store, ROOT_PREFIX.into(), rank, size, config)
    }

    fn join(
        store: Arc<dyn Store>,
        prefix: String,
        rank: usize,
        size: usize,
        config: ShmConfig,
    ) -> Result<ShmCollective> {
        config.check()?;
        if size > MAX_RANKS {
            return Err(Error::Config {
                name: "group size".into(),
                value: size.to_string(),
                expected: format!("at most {MAX_RANKS} ranks on one host"),
            });
        }
        check_rank(rank, size)?;
        let segment = Joiner {
            store: store.as_ref(),
            prefix: &prefix,
            rank,
            size,
            job_id: &config.job_id,
            slot_bytes: config.slot_bytes,
            timeout: config.start_timeout,
        }
        .join()?;
        let steps = Lockstep::new(segment, rank, patience(&config, size));
        tracing::debug!("rank {rank} of {size}: shared-memory group '{prefix}' attached");
        Ok(ShmCollective {
            topology: Topology::single_host(rank, size),
            config,
            store,
            prefix,
            group: Group::new(rank, steps),
        })
    }

    fn rank(&self) -> usize {
        self.topology.rank()
    }

    fn size(&self) -> usize {
        self.topology.size()
    }

    /// The group's steps, unless a failure ended them.
    fn steps(&self) -> Result<MutexGuard<'_, Calls<Lockstep>>> {
        let calls = self.group.lock()?;
        calls.transport.usable()?;
        Ok(calls)
    }
}

/// Spinning pays when every rank has a core of its own; otherwise a spinning rank takes
/// the core from the rank it waits for, so it only polls, and briefly.
fn patience(config: &ShmConfig, size: usize) -> Patience {
    let crowded = size > host_cores();
    let (spin, poll) = if crowded {
        (Duration::ZERO, Duration::from_micros(20))
    } else {
        (Duration::from_micros(5), Duration::from_micros(50))
    };
    let poll = config.busy_poll.unwrap_or(poll);
    Patience {
        spin: spin.min(poll),
        poll,
        timeout: config.op_timeout,
    }
}

/// Cores of the host, whatever this process's affinity: ranks bound one per core (as
/// `mpirun --bind-to core` does) each see a single core but do not crowd each other.
fn host_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).ok().filter(|n| *n > 0).unwrap_or(1)
}

fn parts<'a>(rank: usize, op: OpKind, tensors: &'a mut [TensorMut<'_>]) -> Result<Vec<Part<'a>>> {
    tensors
        .iter_mut()
        .map(|t| {
            let dtype = t.dtype();
            Ok(Part {
                dtype,
                bytes: t.host_mut_for("shm", rank, op.name())?,
            })
        })
        .collect()
}

impl Collective for ShmCollective {
    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn backend(&self) -> &'static str {
        "shm"
    }

    fn supports(&self, device: Device) -> bool {
        device == Device::Cpu
    }

    /// Small tensors of a batch are copied in together and synchronised once.
    fn fuses_batches(&self) -> bool {
        true
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let rank = self.rank();
        validate::allreduce(rank, tensors, reduction)?;
        let name = batch_name(tensors);
        let mut parts = parts(rank, OpKind::Allreduce, tensors)?;
        let mut calls = self.steps()?;
        allreduce::allreduce(
            &mut calls.transport,
            &name,
            &mut parts,
            reduction,
            self.config.small_bytes,
        )
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        let rank = self.rank();
        let name = batch_name(tensors);
        validate::root(rank, self.size(), root, &name)?;
        let mut parts = parts(rank, OpKind::Broadcast, tensors)?;
        let mut calls = self.steps()?;
        movement::broadcast(&mut calls.transport, &name, &mut parts, root)
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let (rank, op) = (self.rank(), OpKind::Allgather);
        validate::allgather(rank, self.size(), input, output, counts)?;
        let element = input.dtype().size();
        let source = input.host_for("shm", rank, op.name())?;
        let target = output.host_mut_for("shm", rank, op.name())?;
        let mut calls = self.steps()?;
        movement::allgather(
            &mut calls.transport,
            input.name(),
            source,
            target,
            counts,
            element,
        )
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let (rank, op) = (self.rank(), OpKind::Alltoall);
        validate::alltoall(rank, self.size(), input, send_counts, output, recv_counts)?;
        let element = input.dtype().size();
        let source = input.host_for("shm", rank, op.name())?;
        let target = output.host_mut_for("shm", rank, op.name())?;
        let mut calls = self.steps()?;
        movement::alltoall(
            &mut calls.transport,
            input.name(),
            source,
            &blocks(0, send_counts, element),
            target,
            &blocks(0, recv_counts, element),
        )
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let (rank, op) = (self.rank(), OpKind::Reducescatter);
        validate::reducescatter(rank, self.size(), input, output, counts, reduction)?;
        let source = input.host_for("shm", rank, op.name())?;
        let target = output.host_mut_for("shm", rank, op.name())?;
        let mut calls = self.steps()?;
        reducescatter::reducescatter(
            &mut calls.transport,
            input.name(),
            input.dtype(),
            source,
            target,
            counts,
            reduction,
        )
    }

    fn barrier(&self) -> Result<()> {
        let mut calls = self.steps()?;
        let call = Call {
            op: Op::Barrier,
            tensor: "barrier",
        };
        calls.transport.sync(&call, Desc::new(Op::Barrier, 0))
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let Some(sub) = self.group.split(&self.prefix, self.size(), members)? else {
            return Ok(None);
        };
        let (store, config) = (self.store.clone(), self.config.clone());
        let group = Self::join(store, sub.prefix, sub.rank, members.len(), config)?;
        Ok(Some(Box::new(group)))
    }
}
