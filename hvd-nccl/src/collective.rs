//! [`NcclCollective`]: forming the communicator through the store, splitting it, and
//! running every call to completion or to a failure that names its cause.

use std::ffi::c_int;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use hvd_core::driver::{Calls, Group, fingerprint};
use hvd_core::{DeviceBlock, DeviceMemory, Error, Result, Store, Topology};

use crate::blame::{Board, Call, Seen};
use crate::comm::{Communicator, State};
use crate::config::NcclConfig;
use crate::cuda::{Device, Stream, Waited};
use crate::launch::{Launch, Queued};
use crate::library::{self, Nccl, UniqueId};
use crate::memory::CudaMemory;
use crate::{driver, library::SPLIT_NOCOLOR};

/// Store namespace of the communicator made by [`NcclCollective::connect`].
const ROOT_PREFIX: &str = "nccl";

/// One rank's member of an NCCL communicator, on one CUDA device and a stream of its own.
/// See the [crate docs](crate).
pub struct NcclCollective {
    pub(crate) topology: Topology,
    pub(crate) config: NcclConfig,
    store: Arc<dyn Store>,
    /// Store namespace of this communicator; sub-groups live below it.
    prefix: String,
    pub(crate) nccl: &'static Nccl,
    pub(crate) device: Arc<Device>,
    pub(crate) stream: Arc<Stream>,
    /// The memory of this transport's stream.
    pub(crate) memory: Arc<CudaMemory>,
    /// One call at a time, poisoned by the first failure (hvd-core's driver group).
    group: Group<Comm>,
}

/// What one call at a time may touch.
pub(crate) struct Comm {
    /// `None` once aborted.
    comm: Option<Communicator>,
    /// Four bytes of device memory for the barrier.
    pub(crate) scratch: DeviceBlock,
}

impl std::fmt::Debug for NcclCollective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclCollective")
            .field("topology", &self.topology)
            .field("device", &self.device.ordinal)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl NcclCollective {
    /// Joins the communicator of the ranks of `topology` as its rank, on CUDA device
    /// `config.device` (default: the local rank, modulo the devices this process sees).
    /// Rank 0 makes the NCCL unique id and publishes it in `store`; every rank joins
    /// without blocking and waits up to `config.start_timeout`, after which the error
    /// names the ranks that never reached the store.
    pub fn connect(
        store: Arc<dyn Store>,
        topology: Topology,
        config: NcclConfig,
    ) -> Result<NcclCollective> {
        let nccl = library::load(&config.nccl_library)?;
        let driver = driver::load(&config.cuda_library)?;
        let ordinal = crate::device_of(&config, topology.local_rank())?;
        crate::sharing::share_devices(
            topology.local_rank(),
            topology.local_size(),
            crate::cuda::device_count(driver)?,
            nccl.version,
        );
        let device = Arc::new(Device::open(driver, ordinal)?);
        let started = Instant::now();
        let stream = {
            let _current = device.enter()?;
            Arc::new(Stream::new(&device)?)
        };
        let board = Board {
            store: store.as_ref(),
            prefix: ROOT_PREFIX,
            topology: &topology,
        };
        board.register()?;
        let id = unique_id(nccl, store.as_ref(), &topology, &config)?;
        let comm = {
            let _current = device.enter()?;
            Communicator::start(nccl, id, topology.rank(), topology.size()).map_err(|text| {
                Error::Io {
                    context: format!("rank {}: ncclCommInitRankConfig", topology.rank()),
                    message: text,
                    kind: std::io::ErrorKind::Other,
                }
            })?
        };
        let left = config.start_timeout.saturating_sub(started.elapsed());
        let joined = joined(&comm, &board, &config, left);
        NcclCollective::assemble(
            store.clone(),
            ROOT_PREFIX.into(),
            topology,
            config,
            nccl,
            device,
            stream,
            comm,
            joined,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        store: Arc<dyn Store>,
        prefix: String,
        topology: Topology,
        config: NcclConfig,
        nccl: &'static Nccl,
        device: Arc<Device>,
        stream: Arc<Stream>,
        comm: Communicator,
        joined: Result<()>,
    ) -> Result<NcclCollective> {
        if let Err(e) = joined {
            let _current = device.enter();
            comm.abort();
            stream.destroy(device.driver);
            return Err(e);
        }
        let memory = Arc::new(CudaMemory::on_stream(
            device.clone(),
            stream.clone(),
            topology.rank(),
            config.op_timeout,
        ));
        let dynamic: Arc<dyn DeviceMemory> = memory.clone();
        let scratch = DeviceBlock::alloc(&dynamic, 4)?;
        tracing::debug!(
            "rank {} of {}: NCCL communicator '{prefix}' on cuda:{}",
            topology.rank(),
            topology.size(),
            device.ordinal
        );
        let topology_rank = topology.rank();
        Ok(NcclCollective {
            topology,
            config,
            store,
            prefix,
            nccl,
            device,
            stream,
            memory,
            group: Group::new(
                topology_rank,
                Comm {
                    comm: Some(comm),
                    scratch,
                },
            ),
        })
    }

    /// The CUDA device the communicator runs on.
    pub fn device(&self) -> hvd_core::Device {
        hvd_core::Device::Cuda(self.device.ordinal)
    }

    pub(crate) fn rank(&self) -> usize {
        self.topology.rank()
    }

    pub(crate) fn size(&self) -> usize {
        self.topology.size()
    }

    fn board(&self) -> Board<'_> {
        Board {
            store: self.store.as_ref(),
            prefix: &self.prefix,
            topology: &self.topology,
        }
    }

    /// Runs one call: `queue` puts its work on the stream, then the call waits until the
    /// stream has run it. A failure ends the group: the communicator is aborted, the rank
    /// to blame is named, and every later call returns the same error.
    pub(crate) fn call(
        &self,
        op: &'static str,
        tensor: &str,
        queue: impl FnOnce(&Launch<'_>, &mut Comm) -> Queued,
    ) -> Result<()> {
        let mut group = self.group.lock()?;
        let _current = self.device.enter()?;
        let Some(comm) = group.transport.comm.take() else {
            return Err(Error::Shutdown {
                cause: format!("rank {}: the NCCL communicator was aborted", self.rank()),
            });
        };
        let launch = Launch {
            nccl: self.nccl,
            driver: self.device.driver,
            comm: &comm,
            stream: &self.stream,
        };
        let seen = match queue(&launch, &mut group.transport) {
            Err(text) => Some(Seen::Failed(text)),
            Ok(()) => self.settle(&comm),
        };
        group.transport.comm = Some(comm);
        match seen {
            None => Ok(()),
            Some(seen) => Err(self.fail(&mut group, op, tensor, seen)),
        }
    }

    /// Waits until the queued work has run, or says what went wrong.
    fn settle(&self, comm: &Communicator) -> Option<Seen> {
        let started = Instant::now();
        let timeout = self.config.op_timeout;
        // A non-blocking communicator may still be queuing the group.
        match comm.wait(timeout) {
            State::Ready => {}
            State::Failed(text) => return Some(Seen::Failed(text)),
            State::InProgress => return Some(Seen::TimedOut),
        }
        let left = timeout.saturating_sub(started.elapsed());
        let watch = || match comm.state() {
            State::Failed(text) => Some(text),
            _ => None,
        };
        match self.stream.synchronize(self.device.driver, left, watch) {
            // Work that failed may still have run to its end: NCCL's word is the last.
            Ok(Waited::Done) => match comm.state() {
                State::Failed(text) => Some(Seen::Failed(text)),
                _ => None,
            },
            Ok(Waited::TimedOut) => Some(Seen::TimedOut),
            Ok(Waited::Stopped(text)) => Some(Seen::Failed(text)),
            Err(e) => Some(Seen::Failed(e.to_string())),
        }
    }

    /// Ends the group after `seen`: posts it, aborts the communicator (which ends its
    /// stuck work), and names the rank to blame.
    fn fail(
        &self,
        group: &mut MutexGuard<'_, Calls<Comm>>,
        op: &'static str,
        tensor: &str,
        seen: Seen,
    ) -> Error {
        let board = self.board();
        // Posted before the abort, so that peers who notice this rank leaving find out why.
        board.post(seen.clone());
        if let Some(comm) = group.transport.comm.take() {
            comm.abort();
        }
        let call = Call {
            op,
            tensor,
            waited: self.config.op_timeout,
            grace: (self.config.op_timeout / 2)
                .clamp(Duration::from_secs(1), Duration::from_secs(10)),
        };
        let error = board.verdict(&call, &seen);
        tracing::debug!("{error}");
        group.poison(error.clone());
        error
    }

    /// Splits off `members` (see [`Collective::split`](hvd_core::Collective::split)):
    /// `ncclCommSplit` with a color that is a fingerprint of the members, so ranks that
    /// disagree on them never share a communicator, and the members' order as keys.
    pub(crate) fn split_members(&self, members: &[usize]) -> Result<Option<NcclCollective>> {
        let rank = self.rank();
        let subgroup = self.group.split(&self.prefix, self.size(), members)?;
        let position = subgroup.as_ref().map(|s| s.rank);
        let color = match position {
            Some(_) => (fingerprint(members) & 0x3fff_ffff) as c_int,
            None => SPLIT_NOCOLOR,
        };
        let mut group = self.group.lock()?;
        let _current = self.device.enter()?;
        let Some(parent) = group.transport.comm.take() else {
            return Err(Error::Shutdown {
                cause: format!("rank {rank}: the NCCL communicator was aborted"),
            });
        };
        let (child, settled) = split_settled(&parent, color, position, self.config.start_timeout);
        group.transport.comm = Some(parent);
        if let Some(seen) = settled {
            if let Some(child) = &child {
                child.abort();
            }
            return Err(self.fail(&mut group, "split", "process set", seen));
        }
        let (Some(child), Some(subgroup)) = (child, subgroup) else {
            return Ok(None);
        };
        let (sub_rank, prefix) = (subgroup.rank, subgroup.prefix);
        drop(group);
        let topology = self
            .topology
            .subgroup(members)
            .unwrap_or_else(|| Topology::single_host(sub_rank, members.len()));
        if child.count() != Some(members.len()) {
            child.abort();
            return Err(Error::invalid(
                rank,
                "split",
                "process set",
                format!(
                    "the NCCL sub-communicator has {:?} ranks, not the {} members {members:?}: ranks passed different members",
                    child.count(),
                    members.len()
                ),
            ));
        }
        let stream = Arc::new(Stream::new(&self.device)?);
        Board {
            store: self.store.as_ref(),
            prefix: &prefix,
            topology: &topology,
        }
        .register()?;
        NcclCollective::assemble(
            self.store.clone(),
            prefix,
            topology,
            self.config.clone(),
            self.nccl,
            self.device.clone(),
            stream,
            child,
            Ok(()),
        )
        .map(Some)
    }
}

/// Splits `parent` and waits for the split to end: the new communicator (none for a rank
/// outside every sub-group) and what went wrong, if anything. A member left without a
/// communicator is a failure, never a quiet "not a member".
fn split_settled(
    parent: &Communicator,
    color: c_int,
    position: Option<usize>,
    timeout: Duration,
) -> (Option<Communicator>, Option<Seen>) {
    let pending = match parent.split(color, position.unwrap_or(0) as c_int) {
        Ok(pending) => pending,
        Err(text) => return (None, Some(Seen::Failed(text))),
    };
    // NCCL hands the new communicator over only when the parent is done with the split.
    let parent_state = parent.wait(timeout);
    if parent_state == State::InProgress {
        pending.abandon();
        return (None, Some(Seen::TimedOut));
    }
    let child = pending.finish();
    let seen = match (parent_state, &child, position) {
        (State::Failed(text), _, _) => Some(Seen::Failed(text)),
        (_, None, Some(_)) => Some(Seen::Failed(
            "NCCL ended the split without handing back the new communicator".into(),
        )),
        (_, Some(child), _) => match child.wait(timeout) {
            State::Ready => None,
            State::Failed(text) => Some(Seen::Failed(text)),
            State::InProgress => Some(Seen::TimedOut),
        },
        (_, None, None) => None,
    };
    (child, seen)
}

/// The unique id of the communicator: made by rank 0 and published in the store.
fn unique_id(
    nccl: &Nccl,
    store: &dyn Store,
    topology: &Topology,
    config: &NcclConfig,
) -> Result<UniqueId> {
    let key = format!("{ROOT_PREFIX}/id");
    let rank = topology.rank();
    if rank == 0 {
        let mut id = UniqueId { internal: [0; 128] };
        // SAFETY: writes one unique id.
        let code = unsafe { (nccl.get_unique_id)(&mut id) };
        if code != library::SUCCESS {
            return Err(Error::Io {
                context: "rank 0: ncclGetUniqueId".into(),
                message: nccl.describe(code, std::ptr::null_mut()),
                kind: std::io::ErrorKind::Other,
            });
        }
        let bytes: Vec<u8> = id.internal.iter().map(|b| *b as u8).collect();
        store.set(&key, &bytes)?;
        return Ok(id);
    }
    let bytes = store.get(&key, config.start_timeout).map_err(|e| {
        // A store that failed (its server gone) is that, not a wait for rank 0.
        if !hvd_core::store::timed_out(&e) {
            return e;
        }
        Error::Timeout {
            rank,
            op: "connect",
            tensor: "NCCL communicator".into(),
            waited: config.start_timeout,
            waiting_for: format!(
                "rank 0 to publish the NCCL unique id under '{key}' in the store (not started, crashed, or given another store?)"
            ),
        }
    })?;
    let internal: [u8; 128] = bytes.as_slice().try_into().map_err(|_| Error::Protocol {
        rank,
        peer: "rank 0".into(),
        reason: format!(
            "'{key}' holds {} bytes, not an NCCL unique id of 128",
            bytes.len()
        ),
    })?;
    Ok(UniqueId {
        internal: internal.map(|b| b as std::ffi::c_char),
    })
}

/// Waits for the communicator's initialisation; on a timeout, names the ranks that never
/// reached the store.
fn joined(
    comm: &Communicator,
    board: &Board<'_>,
    config: &NcclConfig,
    left: Duration,
) -> Result<()> {
    let rank = board.topology.rank();
    match comm.wait(left) {
        State::Ready => {}
        State::Failed(text) => {
            return Err(Error::Io {
                context: format!("rank {rank}: joining the NCCL communicator"),
                message: text,
                kind: std::io::ErrorKind::Other,
            });
        }
        State::InProgress => {
            let missing: Vec<String> = (0..board.topology.size())
                .filter(|r| !board.registered(*r))
                .map(|r| r.to_string())
                .collect();
            let waiting_for = match missing.len() {
                0 => "NCCL's initialisation to finish (every rank reached the store)".into(),
                1 => format!(
                    "rank {} to join the NCCL communicator (not started, crashed, or given another store?)",
                    missing[0]
                ),
                _ => format!(
                    "ranks {} to join the NCCL communicator (not started, crashed, or given another store?)",
                    missing.join(", ")
                ),
            };
            return Err(Error::Timeout {
                rank,
                op: "connect",
                tensor: "NCCL communicator".into(),
                waited: config.start_timeout,
                waiting_for,
            });
        }
    }
    match comm.count() {
        Some(n) if n == board.topology.size() => Ok(()),
        count => Err(Error::Protocol {
            rank,
            peer: "the group".into(),
            reason: format!(
                "the NCCL communicator has {count:?} ranks, this job {}: ranks were given different sizes",
                board.topology.size()
            ),
        }),
    }
}

impl Drop for NcclCollective {
    fn drop(&mut self) {
        let Ok(_current) = self.device.enter() else {
            return;
        };
        // A failed group is poisoned and its communicator already aborted (`fail`).
        if let Ok(mut group) = self.group.lock()
            && let Some(comm) = group.transport.comm.take()
        {
            // Peers still waiting on this rank learn that it left, not that it died.
            self.board().post(Seen::Left);
            comm.destroy();
        }
        self.stream.destroy(self.device.driver);
    }
}
