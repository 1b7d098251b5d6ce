//! The collectives users call, on the global set or any process set.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hvd_core::{Compression, Device, Error, ReduceOp, Reduction, Result, Topology, validate};

use super::buffer::Buffer;
use super::completion::{self, Completion, Slot};
use super::handle::Handle;
use super::queue::Submission;
use super::request::Op;
use super::set_engine::SetEngine;
use super::stats::StatsSnapshot;
use super::wire::MAX_NAME;
use super::work::{Control, Returns, ReturnsInto, SetRegistry, Work};

/// A group of ranks that runs collectives together: the whole job (what [`crate::Hvd`]
/// derefs to) or a subset made with [`crate::Hvd::add_process_set`].
///
/// Every collective takes a name. Ranks may submit names in any order; each runs once
/// every rank of the set has submitted it, and ranks must agree on its dtype, shape, op
/// and root (a disagreement fails the call on every rank with a message naming both).
#[derive(Clone)]
pub struct ProcessSet {
    id: usize,
    members: Arc<[usize]>,
    /// This rank's global rank.
    global_rank: usize,
    /// This rank's engine for the set; `None` when it is not a member.
    engine: Option<Arc<SetEngine>>,
}

impl std::fmt::Debug for ProcessSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessSet")
            .field("id", &self.id)
            .field("members", &self.members)
            .field("member", &self.engine.is_some())
            .finish()
    }
}

impl ProcessSet {
    pub(crate) fn new(
        id: usize,
        members: Vec<usize>,
        global_rank: usize,
        engine: Option<Arc<SetEngine>>,
    ) -> Self {
        ProcessSet {
            id,
            members: members.into(),
            global_rank,
            engine,
        }
    }

    /// The set's id (0 is the whole job).
    pub fn id(&self) -> usize {
        self.id
    }

    /// The global ranks of the members, in the set's rank order.
    pub fn ranks(&self) -> &[usize] {
        &self.members
    }

    /// Whether this rank belongs to the set.
    pub fn is_member(&self) -> bool {
        self.engine.is_some()
    }

    /// This rank's topology within the set; `None` when it is not a member.
    pub fn topology(&self) -> Option<&Topology> {
        self.engine.as_ref().map(|e| &e.topology)
    }

    /// Counters of the set's background thread on this rank.
    pub fn stats(&self) -> StatsSnapshot {
        self.engine
            .as_ref()
            .map(|e| e.stats.snapshot())
            .unwrap_or_default()
    }

    fn engine(&self, op: &'static str, name: &str) -> Result<&Arc<SetEngine>> {
        let invalid = |reason| Error::invalid(self.global_rank, op, name, reason);
        let engine = self.engine.as_ref().ok_or_else(|| {
            invalid(format!(
                "rank {} is not a member of process set {} (ranks {:?})",
                self.global_rank, self.id, self.members
            ))
        })?;
        if engine.removed.load(Ordering::Relaxed) {
            return Err(invalid(format!(
                "process set {} (ranks {:?}) was removed by remove_process_set",
                self.id, self.members
            )));
        }
        Ok(engine)
    }

    /// Queues `submission`; its result arrives in `slot`.
    fn submit<T>(&self, submission: Submission, slot: Arc<Slot<T>>) -> Result<Handle<T>> {
        let op = submission.request.kind().name();
        let name = &submission.request.name;
        let engine = self.engine(op, name)?;
        let rank = engine.topology.rank();
        if name.len() > MAX_NAME {
            let start: String = name.chars().take(64).collect();
            return Err(Error::invalid(
                rank,
                op,
                format!("{start}..."),
                format!("tensor names are limited to {MAX_NAME} bytes"),
            ));
        }
        let name = name.clone();
        let number = engine.queue.submit(rank, submission)?;
        Ok(Handle::new(
            slot,
            op,
            name,
            Some((engine.driver.clone(), number)),
        ))
    }

    /// Checks a tensor where it enters the runtime (once: nothing below checks again
    /// what only this layer knows) and queues `make(tensor, slot)`'s work for it.
    fn submit_tensor<B: Buffer, T>(
        &self,
        name: &str,
        op: Op,
        tensor: B,
        make: impl FnOnce(B, Completion<T>) -> Work,
    ) -> Result<Handle<T>> {
        let op_name = op.kind().name();
        let (dtype, shape, device) = (tensor.dtype(), tensor.shape(), tensor.device());
        // The one check that a tensor's description (dtype, shape) spans its memory, for
        // every front: the Python extension hands descriptions over unchecked.
        let spans = shape
            .iter()
            .try_fold(dtype.size(), |n, d| n.checked_mul(*d));
        let bytes = match tensor.device_memory() {
            Some(memory) => memory.len(),
            None => tensor.bytes().len(),
        };
        if spans != Some(bytes) {
            return Err(Error::invalid(
                self.global_rank,
                op_name,
                name,
                format!("shape {shape:?} does not match the {bytes} bytes of the tensor"),
            ));
        }
        let (slot, completion) = completion::slot();
        let work = make(tensor, completion);
        let submission = Submission::new(name, op, work, dtype, shape, device);
        self.submit(submission, slot)
    }

    /// Queues the control operation `op` named `name`.
    fn submit_control<T>(
        &self,
        name: String,
        op: Op,
        make: impl FnOnce(Completion<T>) -> Control,
    ) -> Result<Handle<T>> {
        let (slot, completion) = completion::slot();
        let work = Work::Control(make(completion));
        self.submit(Submission::control(name, op, work), slot)
    }

    /// Starts an allreduce of `tensor` with `op`.
    pub fn allreduce_async<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        op: ReduceOp,
    ) -> Result<Handle<B>> {
        self.allreduce_with_async(name, tensor, Reduction::new(op))
    }

    /// Starts an allreduce with scale factors, its float tensors compressed as the
    /// configuration says ([`Config::compression`](crate::Config::compression)).
    pub fn allreduce_with_async<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        reduction: Reduction,
    ) -> Result<Handle<B>> {
        let compression = self.engine("allreduce", name)?.compression;
        self.allreduce_compressed_async(name, tensor, reduction, compression)
    }

    /// Starts an allreduce whose tensor, when it is f32 or f64, travels as `compression`
    /// says whatever the configuration's default: narrowed to f16 or bf16 for the
    /// transport and widened back into `tensor` (Horovod's `Compression.fp16`). Every
    /// rank must pass the same compression for a tensor: a difference fails the call on
    /// every rank.
    pub fn allreduce_compressed_async<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        reduction: Reduction,
        compression: Compression,
    ) -> Result<Handle<B>> {
        self.allreduce_work(name, None, tensor, reduction, compression)
    }

    /// Starts an allreduce of `input` whose result goes to `output` (of the same dtype,
    /// shape and device), leaving `input` as it was: the handle gives `output` back.
    /// Device tensors are read from one and written to the other by the transport (or
    /// copied down from one and up into the other when staged through the host), so no
    /// spare copy of the input is made on the device; a host input is copied into
    /// `output` here. Compressed as the configuration says.
    pub fn allreduce_into_async<B: Buffer>(
        &self,
        name: &str,
        input: B,
        mut output: B,
        reduction: Reduction,
    ) -> Result<Handle<B>> {
        let compression = self.engine("allreduce", name)?.compression;
        if self.check_into("allreduce", name, &input, &output)? {
            output.bytes_mut().copy_from_slice(input.bytes());
            return self.allreduce_work(name, None, output, reduction, compression);
        }
        self.allreduce_work(name, Some(input), output, reduction, compression)
    }

    /// Checks that an out-of-place operation's `output` matches its `input` (dtype,
    /// shape, device, bytes); true when they are host tensors, whose input the caller
    /// copies into the output.
    fn check_into<B: Buffer>(
        &self,
        op: &'static str,
        name: &str,
        input: &B,
        output: &B,
    ) -> Result<bool> {
        let (dtype, shape, device) = (input.dtype(), input.shape(), input.device());
        let fits = (dtype, &shape, device) == (output.dtype(), &output.shape(), output.device());
        let lens = |b: &B| b.device_memory().map_or(b.bytes().len(), |m| m.len());
        if !fits || lens(input) != lens(output) {
            return Err(Error::invalid(
                self.global_rank,
                op,
                name,
                format!(
                    "the output ({} {:?} on {}, {} bytes) does not match the input \
                     ({dtype} {shape:?} on {device}, {} bytes)",
                    output.dtype(),
                    output.shape(),
                    output.device(),
                    lens(output),
                    lens(input)
                ),
            ));
        }
        Ok(device == Device::Cpu)
    }

    /// Checks and queues an allreduce into `tensor`, of `input` when there is one (device
    /// tensors only) and of `tensor` itself otherwise.
    fn allreduce_work<B: Buffer>(
        &self,
        name: &str,
        input: Option<B>,
        tensor: B,
        reduction: Reduction,
        compression: Compression,
    ) -> Result<Handle<B>> {
        validate::reduction_dtype(
            self.global_rank,
            "allreduce",
            name,
            tensor.dtype(),
            reduction,
        )?;
        if tensor.device() != Device::Cpu && compression.wire_dtype(tensor.dtype()).is_some() {
            return Err(Error::invalid(
                self.global_rank,
                "allreduce",
                name,
                format!(
                    "{compression} compression narrows host tensors only; this one is on {}",
                    tensor.device()
                ),
            ));
        }
        let op = Op::Allreduce {
            reduction,
            compression,
        };
        self.submit_tensor(name, op, tensor, |tensor, slot| match input {
            Some(input) => Work::InPlace(ReturnsInto::new(input, tensor, slot)),
            None => Work::InPlace(Returns::new(tensor, slot)),
        })
    }

    /// Allreduces `tensor` with `op` and returns the result.
    pub fn allreduce<B: Buffer>(&self, name: &str, tensor: B, op: ReduceOp) -> Result<B> {
        self.allreduce_async(name, tensor, op)?.wait()
    }

    /// Starts an allreduce that combines the ranks' tensors with Adasum
    /// ([`hvd_core::adasum`]): Horovod's scale-invariant combination of gradients,
    /// pairwise and recursive over the ranks, each tensor on its own. Floating-point
    /// tensors only, over a power-of-two number of ranks. Adasum combines on the host: a
    /// device tensor is copied down and back up, when the job has a device transport or
    /// host staging.
    pub fn adasum_async<B: Buffer>(&self, name: &str, tensor: B) -> Result<Handle<B>> {
        self.adasum_work(name, None, tensor)
    }

    /// Starts an Adasum of `input` whose result goes to `output` (of the same dtype, shape
    /// and device), leaving `input` as it was, as
    /// [`allreduce_into_async`](Self::allreduce_into_async) does.
    pub fn adasum_into_async<B: Buffer>(
        &self,
        name: &str,
        input: B,
        mut output: B,
    ) -> Result<Handle<B>> {
        if self.check_into("adasum", name, &input, &output)? {
            output.bytes_mut().copy_from_slice(input.bytes());
            return self.adasum_work(name, None, output);
        }
        self.adasum_work(name, Some(input), output)
    }

    /// Checks and queues an Adasum into `tensor`, of `input` when there is one (device
    /// tensors only) and of `tensor` itself otherwise.
    fn adasum_work<B: Buffer>(&self, name: &str, input: Option<B>, tensor: B) -> Result<Handle<B>> {
        let engine = self.engine("adasum", name)?;
        let device = match tensor.device() {
            device if device != Device::Cpu && engine.copies_devices => Device::Cpu,
            device => device,
        };
        hvd_core::adasum::check(
            self.global_rank,
            name,
            tensor.dtype(),
            device,
            engine.topology.size(),
        )?;
        self.submit_tensor(name, Op::Adasum, tensor, |tensor, slot| match input {
            Some(input) => Work::InPlace(ReturnsInto::new(input, tensor, slot)),
            None => Work::InPlace(Returns::new(tensor, slot)),
        })
    }

    /// Combines `tensor` over the ranks with Adasum and returns the result.
    pub fn adasum<B: Buffer>(&self, name: &str, tensor: B) -> Result<B> {
        self.adasum_async(name, tensor)?.wait()
    }

    /// Allreduces several tensors, submitting all before waiting so they can be fused.
    pub fn grouped_allreduce<B: Buffer>(
        &self,
        tensors: Vec<(String, B)>,
        op: ReduceOp,
    ) -> Result<Vec<B>> {
        let handles = tensors
            .into_iter()
            .map(|(name, t)| self.allreduce_async(&name, t, op))
            .collect::<Result<Vec<_>>>()?;
        handles.into_iter().map(Handle::wait).collect()
    }

    /// Starts an allgather: the ranks' tensors concatenated along the first dim (which may
    /// differ between ranks).
    pub fn allgather_async<B: Buffer>(&self, name: &str, tensor: B) -> Result<Handle<B>> {
        self.submit_tensor(name, Op::Allgather, tensor, |tensor, slot| {
            Work::Resized(Returns::new(tensor, slot))
        })
    }

    pub fn allgather<B: Buffer>(&self, name: &str, tensor: B) -> Result<B> {
        self.allgather_async(name, tensor)?.wait()
    }

    /// Starts a broadcast of `root`'s tensor (a rank of this set) to every member.
    pub fn broadcast_async<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        root: usize,
    ) -> Result<Handle<B>> {
        let engine = self.engine("broadcast", name)?;
        validate::root(engine.topology.rank(), engine.topology.size(), root, name)?;
        self.submit_tensor(name, Op::Broadcast { root }, tensor, |tensor, slot| {
            Work::InPlace(Returns::new(tensor, slot))
        })
    }

    pub fn broadcast<B: Buffer>(&self, name: &str, tensor: B, root: usize) -> Result<B> {
        self.broadcast_async(name, tensor, root)?.wait()
    }

    /// Broadcasts every tensor of a named map (model parameters, optimizer state) from
    /// `root`, all submitted before waiting.
    pub fn broadcast_parameters<B: Buffer>(
        &self,
        parameters: BTreeMap<String, B>,
        root: usize,
    ) -> Result<BTreeMap<String, B>> {
        let handles = parameters
            .into_iter()
            .map(|(name, t)| Ok((name.clone(), self.broadcast_async(&name, t, root)?)))
            .collect::<Result<Vec<_>>>()?;
        handles
            .into_iter()
            .map(|(name, h)| Ok((name, h.wait()?)))
            .collect()
    }

    /// Starts an alltoall: `splits[r]` rows of the first dim go to rank `r`. The handle
    /// gives the received tensor and the rows received from each rank.
    pub fn alltoall_async<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        splits: &[usize],
    ) -> Result<Handle<(B, Vec<usize>)>> {
        let engine = self.engine("alltoall", name)?;
        let size = engine.topology.size();
        let rows = tensor.shape().first().copied().unwrap_or(1);
        let total = splits.iter().try_fold(0usize, |n, s| n.checked_add(*s));
        if splits.len() != size || total != Some(rows) {
            return Err(Error::invalid(
                engine.topology.rank(),
                "alltoall",
                name,
                format!(
                    "splits {splits:?} must have one entry per rank ({size}) and add up to the first dim ({rows})"
                ),
            ));
        }
        let op = Op::Alltoall {
            splits: splits.to_vec(),
        };
        self.submit_tensor(name, op, tensor, |tensor, slot| {
            Work::Resized(Returns::new(tensor, slot))
        })
    }

    pub fn alltoall<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        splits: &[usize],
    ) -> Result<(B, Vec<usize>)> {
        self.alltoall_async(name, tensor, splits)?.wait()
    }

    /// Starts a reducescatter: the reduction of every rank's tensor, split along the first
    /// dim as evenly as possible (the first ranks get one more row).
    pub fn reducescatter_async<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        op: ReduceOp,
    ) -> Result<Handle<B>> {
        self.reducescatter_with_async(name, tensor, Reduction::new(op))
    }

    /// Starts a reducescatter with scale factors: `prescale` multiplies each rank's
    /// tensor, `postscale` this rank's share of the result.
    pub fn reducescatter_with_async<B: Buffer>(
        &self,
        name: &str,
        tensor: B,
        reduction: Reduction,
    ) -> Result<Handle<B>> {
        validate::reduction_dtype(
            self.global_rank,
            "reducescatter",
            name,
            tensor.dtype(),
            reduction,
        )?;
        let op = Op::Reducescatter { reduction };
        self.submit_tensor(name, op, tensor, |tensor, slot| {
            Work::Resized(Returns::new(tensor, slot))
        })
    }

    pub fn reducescatter<B: Buffer>(&self, name: &str, tensor: B, op: ReduceOp) -> Result<B> {
        self.reducescatter_async(name, tensor, op)?.wait()
    }

    /// Returns once every member has reached the barrier.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_within(None)
    }

    /// Like [`barrier`](Self::barrier), but fails after `timeout` with an error naming
    /// the set. The barrier stays pending: the missing ranks still complete it when
    /// they arrive, so a later barrier on this rank is the next one, not this one again.
    pub fn barrier_timeout(&self, timeout: Duration) -> Result<()> {
        self.barrier_within(Some(timeout))
    }

    fn barrier_within(&self, timeout: Option<Duration>) -> Result<()> {
        let engine = self.engine("barrier", "barrier")?;
        let n = engine.barriers.fetch_add(1, Ordering::Relaxed);
        let handle =
            self.submit_control(format!("hvd.barrier.{n}"), Op::Barrier, Control::Barrier)?;
        self.wait_within(handle, timeout, "barrier", "reach the barrier")
            .numbered(&engine.barriers, n)
    }

    /// Declares that this rank has no more data: until every member has joined, it
    /// contributes zeros to the other ranks' allreduces (`Average` still divides by the
    /// full size). Returns the last rank to join, on every rank.
    pub fn join(&self) -> Result<usize> {
        self.join_within(None)
    }

    /// Like [`join`](Self::join), but fails after `timeout` with an error naming the
    /// set; this rank stays joined.
    pub fn join_timeout(&self, timeout: Duration) -> Result<usize> {
        self.join_within(Some(timeout))
    }

    fn join_within(&self, timeout: Option<Duration>) -> Result<usize> {
        let handle = self.submit_control("hvd.join".into(), Op::Join, Control::Join)?;
        self.wait_within(handle, timeout, "join", "join")
            .into_result()
    }

    /// Waits for a control operation, for at most `timeout` when one is given.
    fn wait_within<T>(
        &self,
        handle: Handle<T>,
        timeout: Option<Duration>,
        op: &'static str,
        what_others_do: &str,
    ) -> Waited<T> {
        let Some(timeout) = timeout else {
            return Waited::Done(handle.wait());
        };
        let tensor = handle.name().to_owned();
        match handle.wait_timeout(timeout) {
            Ok(outcome) => Waited::Done(outcome),
            Err(_) => Waited::GaveUp(Error::Timeout {
                rank: self.global_rank,
                op,
                tensor,
                waited: timeout,
                waiting_for: format!(
                    "every member of process set {} (ranks {:?}) to {what_others_do}; it \
                     stays pending, and the stall warning (HVD_STALL_CHECK_TIME) names the \
                     ranks still missing",
                    self.id, self.members
                ),
            }),
        }
    }

    /// Creates a process set of `members` through `registry`, when every rank of this
    /// set (the job) asks for the same; returns its id.
    pub(crate) fn add_set_request(
        &self,
        members: &[usize],
        timeout: Option<Duration>,
        registry: Arc<dyn SetRegistry>,
    ) -> Result<usize> {
        let op = "add_process_set";
        let engine = self.engine(op, op)?;
        let n = engine.set_additions.fetch_add(1, Ordering::Relaxed);
        let name = format!("hvd.add_process_set.{n}");
        let members = members.to_vec();
        let handle = self.submit_control(name, Op::AddProcessSet { members }, |slot| {
            Control::AddProcessSet { registry, slot }
        })?;
        self.wait_within(handle, timeout, op, "call add_process_set")
            .numbered(&engine.set_additions, n)
            .map_err(|e| match e {
                Error::Mismatch {
                    rank_a,
                    value_a,
                    rank_b,
                    value_b,
                    ..
                } => Error::MismatchedCall {
                    op,
                    property: "members",
                    rank_a,
                    value_a,
                    rank_b,
                    value_b,
                },
                other => other,
            })
    }

    /// Removes process set `id` through `registry`, when every rank asks for it.
    pub(crate) fn remove_set_request(
        &self,
        id: usize,
        registry: Arc<dyn SetRegistry>,
    ) -> Result<()> {
        let name = format!("hvd.remove_process_set.{id}");
        self.submit_control(name, Op::RemoveProcessSet { id }, |slot| {
            Control::RemoveProcessSet { registry, slot }
        })?
        .wait()
    }
}

/// How the wait for a control operation ended.
enum Waited<T> {
    /// The operation completed or failed on every rank that made it.
    Done(Result<T>),
    /// This rank stopped waiting; the operation stays pending.
    GaveUp(Error),
}

impl<T> Waited<T> {
    fn into_result(self) -> Result<T> {
        match self {
            Waited::Done(outcome) => outcome,
            Waited::GaveUp(err) => Err(err),
        }
    }

    /// The outcome of control operation number `n` of those `counter` names. When it
    /// failed, the job failed it on every rank that made it (the stall inspector, a
    /// mismatch): it no longer exists, so this rank's next one takes its number again.
    /// Otherwise a rank that never made it would stay one behind, and every later one
    /// would stall. An operation still pending, or numbered since by another thread,
    /// keeps the numbers as they are.
    fn numbered(self, counter: &AtomicU64, n: u64) -> Result<T> {
        if let Waited::Done(Err(_)) = &self {
            let _ = counter.compare_exchange(n + 1, n, Ordering::Relaxed, Ordering::Relaxed);
        }
        self.into_result()
    }
}
