//! `TcpCollective`: the `Collective` trait over the event loop, choosing an algorithm per
//! call.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use hvd_core::schedule::{Layout, Ring, Schedule, barrier, broadcast, exchange, recursive};
use hvd_core::{
    Collective, DType, Device, Error, ReduceOp, Reduction, Result, Store, Tensor, TensorMut,
    Topology, batch_name, validate,
};

use crate::config::TcpConfig;
use crate::fault::{Call, Fault};
use crate::frame::OpCode;
use crate::io::{EventLoop, Polling};
use crate::mesh::Joiner;
use crate::silence;

/// Store namespace of a group made by [`TcpCollective::connect`].
const ROOT_PREFIX: &str = "tcp";

/// One rank's member of a group connected over TCP. See the [crate docs](crate).
pub struct TcpCollective {
    topology: Topology,
    config: TcpConfig,
    store: Arc<dyn Store>,
    /// Store namespace of this group; sub-groups live below it.
    prefix: String,
    state: Mutex<Group>,
}

/// What calls on a group share; one call runs at a time.
#[derive(Debug)]
struct Group {
    event_loop: EventLoop,
    /// Number of the current call, carried in every frame.
    seq: u32,
    /// Number of `split` calls so far, which names each sub-group's namespace.
    splits: u64,
    /// The failure that ended the group: every later call returns it.
    poisoned: Option<Error>,
}

impl std::fmt::Debug for TcpCollective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpCollective")
            .field("topology", &self.topology)
            .field("prefix", &self.prefix)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl TcpCollective {
    /// Joins the group of `size` ranks as `rank`: listens, publishes this rank's endpoint
    /// in `store`, and connects to every other rank. Every rank calls it with the same
    /// `size` and store; it returns once this rank is connected to all the others, or
    /// fails after `config.start_timeout` naming the ranks that never appeared.
    pub fn connect(
        store: Arc<dyn Store>,
        rank: usize,
        size: usize,
        config: TcpConfig,
    ) -> Result<TcpCollective> {
        Self::join(store, ROOT_PREFIX.into(), rank, size, config)
    }

    fn join(
        store: Arc<dyn Store>,
        prefix: String,
        rank: usize,
        size: usize,
        config: TcpConfig,
    ) -> Result<TcpCollective> {
        if rank >= size {
            return Err(Error::Config {
                name: "rank".into(),
                value: rank.to_string(),
                expected: format!("a rank below the group size {size}"),
            });
        }
        let mesh = Joiner {
            store: store.as_ref(),
            prefix: &prefix,
            rank,
            size,
            config: &config,
        }
        .form()?;
        let polling = Polling::for_ranks_on_host(mesh.topology.local_size(), config.busy_poll);
        let event_loop = EventLoop::new(size, mesh.links, config.op_timeout, polling)
            .map_err(|e| Error::io(format!("rank {rank}: setting up the event loop"), &e))?;
        tracing::debug!("rank {rank} of {size}: group '{prefix}' connected");
        Ok(TcpCollective {
            topology: mesh.topology,
            config,
            store,
            prefix,
            state: Mutex::new(Group {
                event_loop,
                seq: 0,
                splits: 0,
                poisoned: None,
            }),
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
        match &group.poisoned {
            Some(error) => Err(error.clone()),
            None => Ok(group),
        }
    }

    fn call<'t>(
        &self,
        group: &mut Group,
        op: OpCode,
        tensor: &'t str,
        reduction: Reduction,
    ) -> Call<'t> {
        group.seq = group.seq.wrapping_add(1);
        Call {
            rank: self.rank(),
            ranks: self.size(),
            op,
            tensor,
            seq: group.seq,
            reduction,
        }
    }

    /// Runs `schedule`; a failure poisons the group after telling the other ranks.
    fn run(
        &self,
        group: &mut Group,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
    ) -> Result<()> {
        let Err(fault) = group.event_loop.run(call, layout, schedule) else {
            return Ok(());
        };
        let timeout = self.config.op_timeout;
        let fault = silence::find_silent(
            self.store.as_ref(),
            &self.prefix,
            call,
            *fault,
            timeout,
            silence::grace(timeout),
        );
        tracing::warn!(
            "rank {}: {} of '{}' failed, closing the group: {}",
            call.rank,
            call.op.name(),
            call.tensor,
            fault.error
        );
        group.event_loop.abort(&fault, call, layout);
        group.poisoned = Some(fault.error.clone());
        Err(fault.error)
    }

    fn is_small(&self, len: usize) -> bool {
        len <= self.config.small_bytes
    }
}

fn no_sum() -> Reduction {
    Reduction::new(ReduceOp::Sum)
}

fn unsupported(rank: usize, op: OpCode, device: Device, tensor: &str) -> Error {
    Error::Unsupported {
        backend: "tcp",
        what: format!("{device} memory (rank {rank}, {} of '{tensor}')", op.name()),
    }
}

fn host<'a>(rank: usize, op: OpCode, t: &Tensor<'a>) -> Result<&'a [u8]> {
    t.host()
        .ok_or_else(|| unsupported(rank, op, t.device(), t.name()))
}

fn host_mut<'s>(rank: usize, op: OpCode, t: &'s mut TensorMut<'_>) -> Result<&'s mut [u8]> {
    let (device, name) = (t.device(), t.name());
    t.host_mut()
        .ok_or_else(|| unsupported(rank, op, device, name))
}

/// A layout of every tensor of a batch, in order.
fn batch_layout<'a>(
    rank: usize,
    op: OpCode,
    tensors: &'a mut [TensorMut<'_>],
) -> Result<Layout<'a>> {
    let mut layout = Layout::new();
    for t in tensors.iter_mut() {
        let dtype = t.dtype();
        layout.push(dtype, host_mut(rank, op, t)?);
    }
    Ok(layout)
}

/// Byte ranges of per-rank blocks of `counts` elements, back to back from `start`.
fn blocks(start: usize, counts: &[usize], dtype: DType) -> Vec<Range<usize>> {
    let mut at = start;
    counts
        .iter()
        .map(|count| {
            let block = at..at + count * dtype.size();
            at = block.end;
            block
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

fn local_error(call: &Call<'_>, err: &std::io::Error) -> Error {
    Fault::local(call, err).error
}

impl Collective for TcpCollective {
    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn backend(&self) -> &'static str {
        "tcp"
    }

    fn supports(&self, device: Device) -> bool {
        device == Device::Cpu
    }

    /// A batch travels as one message or ring pass, gathered and scattered in place.
    fn fuses_batches(&self) -> bool {
        true
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpCode::Allreduce);
        validate::allreduce(rank, tensors, reduction)?;
        let name = batch_name(tensors);
        let mut layout = batch_layout(rank, op, tensors)?;
        let mut group = self.group()?;
        let call = self.call(&mut group, op, &name, reduction);
        layout
            .prescale(reduction)
            .map_err(|e| local_error(&call, &e))?;
        if size == 1 {
            let all = 0..layout.len();
            return layout
                .finish(all, reduction, 1)
                .map_err(|e| local_error(&call, &e));
        }
        let mut schedule: Box<dyn Schedule> = if self.is_small(layout.len()) {
            Box::new(recursive::allreduce(rank, size, layout.len(), reduction))
        } else {
            Box::new(Ring::allreduce(
                rank,
                size,
                &layout,
                self.config.chunk_bytes,
            ))
        };
        self.run(&mut group, &call, &mut layout, schedule.as_mut())
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpCode::Broadcast);
        let name = batch_name(tensors);
        validate::root(rank, size, root, &name)?;
        let mut layout = batch_layout(rank, op, tensors)?;
        let mut group = self.group()?;
        let call = self.call(&mut group, op, &name, no_sum());
        let mut tree = if self.is_small(layout.len()) {
            broadcast::Tree::binomial(rank, size, root, &layout)
        } else {
            broadcast::Tree::chain(rank, size, root, &layout, self.config.chunk_bytes)
        };
        self.run(&mut group, &call, &mut layout, &mut tree)
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpCode::Allgather);
        validate::allgather(rank, size, input, output, counts)?;
        let dtype = input.dtype();
        let source = host(rank, op, input)?;
        let mut layout = Layout::new();
        layout.push(dtype, host_mut(rank, op, output)?);
        let segments = blocks(0, counts, dtype);
        let mut group = self.group()?;
        let call = self.call(&mut group, op, input.name(), no_sum());
        layout
            .write(segments[rank].start, source)
            .map_err(|e| local_error(&call, &e))?;
        let mut schedule: Box<dyn Schedule> = if self.is_small(layout.len()) {
            Box::new(exchange::allgather(rank, size, &segments))
        } else {
            Box::new(Ring::allgather(
                rank,
                size,
                &segments,
                &layout,
                self.config.chunk_bytes,
            ))
        };
        self.run(&mut group, &call, &mut layout, schedule.as_mut())
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpCode::Alltoall);
        validate::alltoall(rank, size, input, send_counts, output, recv_counts)?;
        let dtype = input.dtype();
        let source = host(rank, op, input)?;
        // Output first, then the input it is sent from.
        let mut layout = Layout::new();
        layout.push(dtype, host_mut(rank, op, output)?);
        let output_len = layout.len();
        let incoming = blocks(0, recv_counts, dtype);
        let outgoing = blocks(output_len, send_counts, dtype);
        layout.push_shared(dtype, source);
        let mut group = self.group()?;
        let call = self.call(&mut group, op, input.name(), no_sum());
        let own = outgoing[rank].start - output_len..outgoing[rank].end - output_len;
        layout
            .write(incoming[rank].start, &source[own])
            .map_err(|e| local_error(&call, &e))?;
        let mut schedule = exchange::alltoall(
            rank,
            size,
            &outgoing,
            &incoming,
            &layout,
            self.config.chunk_bytes,
        );
        self.run(&mut group, &call, &mut layout, &mut schedule)
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let (rank, size, op) = (self.rank(), self.size(), OpCode::Reducescatter);
        validate::reducescatter(rank, size, input, output, counts, reduction)?;
        let dtype = input.dtype();
        // The ring combines in place, and the input is read-only: work on a copy.
        let mut work = host(rank, op, input)?.to_vec();
        let segments = blocks(0, counts, dtype);
        let mut group = self.group()?;
        let call = self.call(&mut group, op, input.name(), reduction);
        {
            let mut layout = Layout::new();
            layout.push(dtype, &mut work);
            layout
                .prescale(reduction)
                .map_err(|e| local_error(&call, &e))?;
            if size == 1 {
                let all = 0..layout.len();
                layout
                    .finish(all, reduction, 1)
                    .map_err(|e| local_error(&call, &e))?;
            } else {
                let mut ring =
                    Ring::reduce_scatter(rank, size, &segments, &layout, self.config.chunk_bytes);
                self.run(&mut group, &call, &mut layout, &mut ring)?;
            }
        }
        host_mut(rank, op, output)?.copy_from_slice(&work[segments[rank].clone()]);
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        let mut group = self.group()?;
        let call = self.call(&mut group, OpCode::Barrier, "barrier", no_sum());
        let mut schedule = barrier::barrier(self.rank(), self.size());
        self.run(&mut group, &call, &mut Layout::new(), &mut schedule)
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
