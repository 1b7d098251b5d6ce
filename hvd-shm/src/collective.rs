//! `ShmCollective`: the `Collective` trait over the steps of a shared-memory group.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hvd_core::{
    Collective, Device, Error, Reduction, Result, Store, Tensor, TensorMut, Topology, batch_name,
    validate,
};

use crate::allreduce::{self, Part};
use crate::config::ShmConfig;
use crate::layout::MAX_RANKS;
use crate::lockstep::{Desc, Lockstep, Patience};
use crate::op::{Call, Op};
use crate::rendezvous::Joiner;
use crate::{movement, plan, reducescatter};

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
    state: Mutex<Group>,
}

#[derive(Debug)]
struct Group {
    steps: Lockstep,
    /// Number of `split` calls so far, which names each sub-group's namespace.
    splits: u64,
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
        if rank >= size {
            return Err(Error::Config {
                name: "rank".into(),
                value: rank.to_string(),
                expected: format!("a rank below the group size {size}"),
            });
        }
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
            state: Mutex::new(Group { steps, splits: 0 }),
        })
    }

    fn rank(&self) -> usize {
        self.topology.rank()
    }

    fn size(&self) -> usize {
        self.topology.size()
    }

    /// The group, unless an earlier failure ended it.
    fn group(&self) -> Result<MutexGuard<'_, Group>> {
        let group = self.state.lock().map_err(|_| Error::Shutdown {
            cause: format!(
                "rank {}: a thread panicked during a call on this group",
                self.rank()
            ),
        })?;
        group.steps.usable()?;
        Ok(group)
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

fn unsupported(rank: usize, op: &str, device: Device, tensor: &str) -> Error {
    Error::Unsupported {
        backend: "shm",
        what: format!("{device} memory (rank {rank}, {op} of '{tensor}')"),
    }
}

fn host<'a>(rank: usize, op: &str, t: &Tensor<'a>) -> Result<&'a [u8]> {
    t.host()
        .ok_or_else(|| unsupported(rank, op, t.device(), t.name()))
}

fn host_mut<'s>(rank: usize, op: &str, t: &'s mut TensorMut<'_>) -> Result<&'s mut [u8]> {
    let (device, name) = (t.device(), t.name());
    t.host_mut()
        .ok_or_else(|| unsupported(rank, op, device, name))
}

fn parts<'a>(rank: usize, op: &str, tensors: &'a mut [TensorMut<'_>]) -> Result<Vec<Part<'a>>> {
    tensors
        .iter_mut()
        .map(|t| {
            let dtype = t.dtype();
            Ok(Part {
                dtype,
                bytes: host_mut(rank, op, t)?,
            })
        })
        .collect()
}

/// FNV-1a of the members: the same on every rank, build and platform.
fn fingerprint(members: &[usize]) -> u64 {
    members
        .iter()
        .flat_map(|m| (*m as u64).to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
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
        let mut parts = parts(rank, "allreduce", tensors)?;
        let mut group = self.group()?;
        allreduce::allreduce(
            &mut group.steps,
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
        let mut parts = parts(rank, "broadcast", tensors)?;
        let mut group = self.group()?;
        movement::broadcast(&mut group.steps, &name, &mut parts, root)
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let (rank, op) = (self.rank(), "allgather");
        validate::allgather(rank, self.size(), input, output, counts)?;
        let element = input.dtype().size();
        let source = host(rank, op, input)?;
        let target = host_mut(rank, op, output)?;
        let mut group = self.group()?;
        movement::allgather(
            &mut group.steps,
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
        let (rank, op) = (self.rank(), "alltoall");
        validate::alltoall(rank, self.size(), input, send_counts, output, recv_counts)?;
        let element = input.dtype().size();
        let source = host(rank, op, input)?;
        let target = host_mut(rank, op, output)?;
        let mut group = self.group()?;
        movement::alltoall(
            &mut group.steps,
            input.name(),
            source,
            &plan::blocks(send_counts, element),
            target,
            &plan::blocks(recv_counts, element),
        )
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let (rank, op) = (self.rank(), "reducescatter");
        validate::reducescatter(rank, self.size(), input, output, counts, reduction)?;
        let source = host(rank, op, input)?;
        let target = host_mut(rank, op, output)?;
        let mut group = self.group()?;
        reducescatter::reducescatter(
            &mut group.steps,
            input.name(),
            input.dtype(),
            source,
            target,
            counts,
            reduction,
        )
    }

    fn barrier(&self) -> Result<()> {
        let mut group = self.group()?;
        let call = Call {
            op: Op::Barrier,
            tensor: "barrier",
        };
        group.steps.sync(&call, Desc::new(Op::Barrier, 0))
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let rank = self.rank();
        validate::members(rank, self.size(), members)?;
        let index = {
            let mut group = self.group()?;
            group.splits += 1;
            group.splits
        };
        let Some(sub_rank) = members.iter().position(|m| *m == rank) else {
            return Ok(None);
        };
        // The members are part of the namespace, so ranks that disagree on them never
        // meet (and time out naming each other) instead of forming a wrong group.
        let prefix = format!("{}/split{index}-{:016x}", self.prefix, fingerprint(members));
        let sub = Self::join(
            self.store.clone(),
            prefix,
            sub_rank,
            members.len(),
            self.config.clone(),
        )?;
        Ok(Some(Box::new(sub)))
    }
}
