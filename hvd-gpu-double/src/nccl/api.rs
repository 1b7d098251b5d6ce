//! The `nccl*` entry points, with the signatures of nccl.h (`ncclUniqueId` by value).

use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::comm::{COMMS, ID_BYTES, Member, name_of_id, new_id, run_or_spawn};
use super::group;
use super::ops::Op;
use super::reduce::{Dtype, RedOp};
use super::{
    Failure, IN_PROGRESS, INVALID_ARGUMENT, NcclResult, SUCCESS, SYSTEM_ERROR,
    UNHANDLED_CUDA_ERROR, error_string,
};
use crate::config::settings;
use crate::cuda::context;
use crate::inject;
use crate::memory::arena;
use crate::trace::trace;

/// `ncclUniqueId`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct UniqueId {
    internal: [c_char; ID_BYTES],
}

/// The leading fields of `ncclConfig_t` that the double reads; NCCL reads as much of a
/// config as its `size` says, and so does the double.
#[repr(C)]
#[derive(Debug)]
pub struct Config {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
}

const CONFIG_MAGIC: u32 = 0xcafe_beef;

#[cfg(test)]
impl Config {
    pub(crate) fn non_blocking() -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: CONFIG_MAGIC,
            version: 0,
            blocking: 0,
        }
    }
}
const SPLIT_NOCOLOR: c_int = -1;
const SCALAR_HOST_IMMEDIATE: c_int = 1;

/// The last error of a call that had no communicator to keep it.
static LAST_ERROR: Mutex<Option<CString>> = Mutex::new(None);

fn global_error(text: &str) {
    let text = CString::new(text.replace('\0', " ")).unwrap_or_default();
    *LAST_ERROR.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
}

/// Reports `failure` as a call's result: its text becomes the last error (of the
/// communicator when there is one), and a group being built fails at its end.
fn failed(member: Option<&Member>, failure: Failure) -> NcclResult {
    match member {
        Some(m) => m.set_last_error(&failure.message),
        None => global_error(&failure.message),
    }
    let code = failure.code;
    group::fail(failure);
    code
}

fn injected(function: &str, rank: Option<usize>) -> Result<(), Failure> {
    if inject::fails(function, rank) {
        return Err(Failure::new(
            SYSTEM_ERROR,
            format!("injected fault: {function} failed"),
        ));
    }
    Ok(())
}

fn member(comm: usize) -> Result<Arc<Member>, Failure> {
    COMMS.get(comm).ok_or_else(|| {
        Failure::new(
            INVALID_ARGUMENT,
            format!("{comm:#x} is not a live communicator"),
        )
    })
}

/// Writes through an output pointer, refusing a null one.
///
/// # Safety
/// `out` is null or valid for writing a `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::new(INVALID_ARGUMENT, "a null output pointer"));
    }
    // SAFETY: non-null, and valid for writes by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Whether a config asks for a non-blocking communicator; `None` for no config.
///
/// # Safety
/// `config` is null or points to an `ncclConfig_t` of at least `config.size` bytes.
unsafe fn blocking(config: *const Config) -> Result<Option<bool>, Failure> {
    if config.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract; the leading fields exist in every config version.
    let (size, magic, value) = unsafe { ((*config).size, (*config).magic, (*config).blocking) };
    if magic != CONFIG_MAGIC || size < std::mem::size_of::<Config>() {
        return Err(Failure::new(
            INVALID_ARGUMENT,
            "the config was not initialised with NCCL_CONFIG_INITIALIZER",
        ));
    }
    // NCCL_CONFIG_UNDEF_INT (INT_MIN) keeps the default, blocking.
    Ok(Some(value != 0))
}

fn result(member: Option<&Member>, outcome: Result<NcclResult, Failure>) -> NcclResult {
    outcome.unwrap_or_else(|failure| failed(member, failure))
}

/// # Safety
/// `version` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetVersion(version: *mut c_int) -> NcclResult {
    trace!("ncclGetVersion");
    if let Some(problem) = &settings().problem {
        return failed(None, Failure::new(INVALID_ARGUMENT, problem.clone()));
    }
    // SAFETY: the caller's contract.
    result(
        None,
        unsafe { put(version, inject::nccl_version()) }.map(|()| SUCCESS),
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGetErrorString(code: NcclResult) -> *const c_char {
    error_string(code).as_ptr().cast()
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGetLastError(comm: usize) -> *const c_char {
    if let Some(member) = COMMS.get(comm) {
        return member.last_error();
    }
    let last = LAST_ERROR.lock().unwrap_or_else(|e| e.into_inner());
    // The text lives in a static until the next error replaces it.
    last.as_ref().map_or(c"".as_ptr(), |t| t.as_ptr())
}

/// # Safety
/// `id` is null or valid for writing an `ncclUniqueId`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetUniqueId(id: *mut UniqueId) -> NcclResult {
    trace!("ncclGetUniqueId");
    let made = new_id().map(|b| b as c_char);
    // SAFETY: the caller's contract.
    result(
        None,
        injected("ncclGetUniqueId", None)
            .and_then(|()| unsafe { put(id, UniqueId { internal: made }).map(|()| SUCCESS) }),
    )
}

/// # Safety
/// `comm` is null or valid for writing a communicator; `config` as in
/// [`ncclCommInitRankConfig`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankConfig(
    comm: *mut usize,
    nranks: c_int,
    id: UniqueId,
    rank: c_int,
    config: *const Config,
) -> NcclResult {
    trace!("ncclCommInitRankConfig", "rank={rank} nranks={nranks}");
    let outcome = (|| {
        if let Some(problem) = &settings().problem {
            return Err(Failure::new(INVALID_ARGUMENT, problem.clone()));
        }
        let (size, me) = match (usize::try_from(nranks), usize::try_from(rank)) {
            (Ok(size), Ok(me)) if me < size => (size, me),
            _ => {
                return Err(Failure::new(
                    INVALID_ARGUMENT,
                    format!("rank {rank} does not exist in a communicator of {nranks}"),
                ));
            }
        };
        injected("ncclCommInitRankConfig", Some(me))?;
        let bytes = id.internal.map(|b| b as u8);
        let name = name_of_id(&bytes).ok_or_else(|| {
            Failure::new(
                INVALID_ARGUMENT,
                "the unique id did not come from ncclGetUniqueId",
            )
        })?;
        // SAFETY: the caller's contract.
        let blocking = unsafe { blocking(config) }?.unwrap_or(true);
        let ordinal = context::current_ordinal().filter(|_| context::initialized().is_ok()).ok_or_else(|| {
            Failure::new(
                UNHANDLED_CUDA_ERROR,
                "no CUDA context is current on this thread: NCCL would pick device 0 for every rank",
            )
        })?;
        let member = Member::new(Some((me, size)), ordinal, blocking);
        // SAFETY: the caller's contract.
        unsafe { put(comm, COMMS.insert(member.clone())) }?;
        Ok(run_or_spawn(&member, move |m| m.join(&name)))
    })();
    result(None, outcome)
}

/// # Safety
/// `comm` is null or valid for writing a communicator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRank(
    comm: *mut usize,
    nranks: c_int,
    id: UniqueId,
    rank: c_int,
) -> NcclResult {
    // SAFETY: the caller's contract; no config.
    unsafe { ncclCommInitRankConfig(comm, nranks, id, rank, std::ptr::null()) }
}

/// # Safety
/// `newcomm` is null or valid for writing a communicator; `config` is null or an
/// initialised `ncclConfig_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommSplit(
    comm: usize,
    color: c_int,
    key: c_int,
    newcomm: *mut usize,
    config: *const Config,
) -> NcclResult {
    let outcome = (|| {
        let parent = member(comm)?;
        trace!(
            "ncclCommSplit",
            "rank={} color={color} key={key}",
            parent.rank()
        );
        injected("ncclCommSplit", Some(parent.rank()))?;
        parent.usable()?;
        if color < SPLIT_NOCOLOR {
            return Err(Failure::new(
                INVALID_ARGUMENT,
                format!("color {color} is negative"),
            ));
        }
        // SAFETY: the caller's contract.
        let blocking = unsafe { blocking(config) }?.unwrap_or(parent.blocking);
        let child = (color != SPLIT_NOCOLOR).then(|| Member::new(None, parent.ordinal, blocking));
        // As NCCL 2.28 does: `newcomm` stays null until the split has ended, and is then
        // written from the thread that formed it, before the parent stops being in
        // progress. A caller must wait on the parent before it reads `newcomm`.
        // SAFETY: the caller's contract.
        unsafe { put(newcomm, 0) }?;
        let out = newcomm as usize;
        let work = {
            let parent = parent.clone();
            let child = child.clone();
            move || -> Result<(), Failure> {
                let placed = parent.split_exchange(color, key)?;
                if let (Some(child), Some((name, rank, size))) = (&child, placed) {
                    child.place(rank, size);
                    child.join(&name)?;
                }
                Ok(())
            }
        };
        // NCCL hands back the child whether the split worked or not (a failed one reports
        // its error through `ncclCommGetAsyncError`).
        let hand_back = move |child: &Option<Arc<Member>>| {
            let handle = child.as_ref().map_or(0, |c| COMMS.insert(c.clone()));
            // SAFETY: the caller's contract: `newcomm` stays valid until the split ends.
            unsafe { (out as *mut usize).write(handle) };
        };
        if parent.blocking {
            let outcome = work();
            if let (Err(failure), Some(child)) = (&outcome, &child) {
                child.fail(failure.clone());
            }
            hand_back(&child);
            return outcome.map(|()| SUCCESS);
        }
        parent.begin_background();
        let polls = parent.polls();
        std::thread::spawn(move || {
            let outcome = work();
            if let Err(failure) = &outcome {
                parent.fail(failure.clone());
                if let Some(child) = &child {
                    child.fail(failure.clone());
                }
            }
            // Real NCCL may end a split before the caller looks; the double waits (briefly)
            // until the caller has looked at the parent at least once, so that a caller
            // reading `newcomm` without waiting always finds it null, not only sometimes.
            parent.await_poll_after(polls, std::time::Duration::from_secs(2));
            hand_back(&child);
            parent.end_background();
        });
        Ok(IN_PROGRESS)
    })();
    result(None, outcome)
}

/// # Safety
/// `error` is null or valid for writing an `ncclResult_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetAsyncError(comm: usize, error: *mut NcclResult) -> NcclResult {
    let outcome = member(comm).and_then(|m| {
        injected("ncclCommGetAsyncError", Some(m.rank()))?;
        m.polled();
        // SAFETY: the caller's contract.
        unsafe { put(error, m.async_error()) }.map(|()| SUCCESS)
    });
    result(None, outcome)
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclCommAbort(comm: usize) -> NcclResult {
    let outcome = COMMS
        .remove(comm)
        .ok_or_else(|| {
            Failure::new(
                INVALID_ARGUMENT,
                format!("{comm:#x} is not a live communicator"),
            )
        })
        .map(|m| {
            trace!("ncclCommAbort", "rank={}", m.rank());
            m.leave(true);
            // Blocking even for a non-blocking communicator: NCCL marks it destroyed
            // first, which makes the abort's group a blocking one.
            SUCCESS
        });
    result(None, outcome)
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclCommDestroy(comm: usize) -> NcclResult {
    let outcome = COMMS
        .remove(comm)
        .ok_or_else(|| {
            Failure::new(
                INVALID_ARGUMENT,
                format!("{comm:#x} is not a live communicator"),
            )
        })
        .map(|m| {
            trace!("ncclCommDestroy", "rank={}", m.rank());
            // Queued work finishes first; a failed communicator has none that will.
            while !m.has_failed() && m.outstanding.load(Ordering::Acquire) > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            m.leave(m.has_failed());
            SUCCESS
        });
    result(None, outcome)
}

/// # Safety
/// `out` is null or valid for writing an int.
unsafe fn query(comm: usize, out: *mut c_int, what: impl Fn(&Member) -> usize) -> NcclResult {
    let outcome = member(comm).and_then(|m| {
        // SAFETY: the caller's contract.
        unsafe { put(out, what(&m) as c_int) }.map(|()| SUCCESS)
    });
    result(None, outcome)
}

/// # Safety
/// `count` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(comm: usize, count: *mut c_int) -> NcclResult {
    // SAFETY: the caller's contract.
    unsafe { query(comm, count, Member::size) }
}

/// # Safety
/// `rank` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(comm: usize, rank: *mut c_int) -> NcclResult {
    // SAFETY: the caller's contract.
    unsafe { query(comm, rank, Member::rank) }
}

/// # Safety
/// `device` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCuDevice(comm: usize, device: *mut c_int) -> NcclResult {
    // SAFETY: the caller's contract.
    unsafe { query(comm, device, |m| m.ordinal as usize) }
}

fn dtype(code: c_int) -> Result<Dtype, Failure> {
    Dtype::from_nccl(code).ok_or_else(|| {
        Failure::new(
            INVALID_ARGUMENT,
            format!("datatype {code} is not one the double reduces"),
        )
    })
}

/// # Safety
/// `op` is null or valid for writing an `ncclRedOp_t`; `scalar` holds one element of
/// `datatype`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRedOpCreatePreMulSum(
    op: *mut c_int,
    scalar: *const c_void,
    datatype: c_int,
    residence: c_int,
    comm: usize,
) -> NcclResult {
    trace!(
        "ncclRedOpCreatePreMulSum",
        "dtype={datatype} residence={residence}"
    );
    let outcome = member(comm).and_then(|m| {
        let dtype = dtype(datatype)?;
        if residence != SCALAR_HOST_IMMEDIATE || scalar.is_null() {
            return Err(Failure::new(
                INVALID_ARGUMENT,
                "the double takes ncclScalarHostImmediate scalars (in host memory) only",
            ));
        }
        let mut bytes = [0u8; 8];
        // SAFETY: the caller's contract: one element of `dtype` at `scalar`.
        unsafe {
            std::ptr::copy_nonoverlapping(scalar.cast::<u8>(), bytes.as_mut_ptr(), dtype.size())
        };
        let id = m.new_redop(dtype, RedOp::PreMulSum(bytes));
        // SAFETY: the caller's contract.
        unsafe { put(op, id) }.map(|()| SUCCESS)
    });
    result(None, outcome)
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclRedOpDestroy(op: c_int, comm: usize) -> NcclResult {
    let outcome = member(comm).and_then(|m| {
        let removed = m
            .redops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&op);
        removed.map(|_| SUCCESS).ok_or_else(|| {
            Failure::new(
                INVALID_ARGUMENT,
                format!("reduction {op} was not created for this communicator"),
            )
        })
    });
    result(None, outcome)
}

/// The reduction `op` means for `member` and `dtype`.
fn redop(member: &Member, op: c_int, dtype: Dtype) -> Result<RedOp, Failure> {
    if let Some(builtin) = RedOp::builtin(op) {
        return Ok(builtin);
    }
    let ops = member.redops.lock().unwrap_or_else(|e| e.into_inner());
    match ops.get(&op) {
        Some((made_for, red)) if *made_for == dtype => Ok(*red),
        Some((made_for, _)) => Err(Failure::new(
            INVALID_ARGUMENT,
            format!(
                "reduction {op} was made for {}, used with {}",
                made_for.name(),
                dtype.name()
            ),
        )),
        None => Err(Failure::new(
            INVALID_ARGUMENT,
            format!("reduction {op} does not exist"),
        )),
    }
}

/// Checks that `bytes` at `ptr` are memory of the communicator's device.
fn buffer(member: &Member, what: &str, ptr: u64, bytes: usize) -> Result<(), Failure> {
    if bytes == 0 {
        return Ok(());
    }
    let found = arena().and_then(|a| a.find(ptr));
    match found {
        Some(f) if f.ordinal != member.ordinal => Err(Failure::new(
            INVALID_ARGUMENT,
            format!(
                "{what} is memory of device {}, the communicator's is {}",
                f.ordinal, member.ordinal
            ),
        )),
        Some(f) if ptr + bytes as u64 <= f.start + f.len as u64 => Ok(()),
        Some(_) => Err(Failure::new(
            INVALID_ARGUMENT,
            format!("{what} ({bytes} bytes at {ptr:#x}) runs past the end of its allocation"),
        )),
        None => Err(Failure::new(
            INVALID_ARGUMENT,
            format!("{what} ({ptr:#x}) is not device memory"),
        )),
    }
}

/// Checks a call and adds it to the group being built (or runs it as its own group).
fn call(
    function: &str,
    comm: usize,
    stream: usize,
    check: impl FnOnce(&Member) -> Result<Op, Failure>,
) -> NcclResult {
    let member = match member(comm) {
        Ok(m) => m,
        Err(failure) => return failed(None, failure),
    };
    let outcome = injected(function, Some(member.rank()))
        .and_then(|()| member.usable())
        .and_then(|()| check(&member))
        .and_then(|op| group::add(member.clone(), stream, op));
    result(Some(&member), outcome)
}

fn peer(member: &Member, peer: c_int) -> Result<usize, Failure> {
    usize::try_from(peer)
        .ok()
        .filter(|p| *p < member.size())
        .ok_or_else(|| {
            Failure::new(
                INVALID_ARGUMENT,
                format!(
                    "rank {peer} does not exist in a communicator of {}",
                    member.size()
                ),
            )
        })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclAllReduce(
    send: u64,
    recv: u64,
    count: usize,
    datatype: c_int,
    op: c_int,
    comm: usize,
    stream: usize,
) -> NcclResult {
    call("ncclAllReduce", comm, stream, |m| {
        trace!(
            "ncclAllReduce",
            "rank={} count={count} dtype={datatype} op={op}",
            m.rank()
        );
        let dtype = dtype(datatype)?;
        let op = redop(m, op, dtype)?;
        buffer(m, "sendbuff", send, count * dtype.size())?;
        buffer(m, "recvbuff", recv, count * dtype.size())?;
        Ok(Op::AllReduce {
            send,
            recv,
            count,
            dtype,
            op,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclBroadcast(
    send: u64,
    recv: u64,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: usize,
    stream: usize,
) -> NcclResult {
    call("ncclBroadcast", comm, stream, |m| {
        trace!(
            "ncclBroadcast",
            "rank={} count={count} dtype={datatype} root={root}",
            m.rank()
        );
        let dtype = dtype(datatype)?;
        let root = peer(m, root)?;
        if m.rank() == root {
            buffer(m, "sendbuff", send, count * dtype.size())?;
        }
        buffer(m, "recvbuff", recv, count * dtype.size())?;
        Ok(Op::Broadcast {
            send,
            recv,
            count,
            dtype,
            root,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclReduce(
    send: u64,
    recv: u64,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: usize,
    stream: usize,
) -> NcclResult {
    call("ncclReduce", comm, stream, |m| {
        trace!(
            "ncclReduce",
            "rank={} count={count} dtype={datatype} op={op} root={root}",
            m.rank()
        );
        let dtype = dtype(datatype)?;
        let op = redop(m, op, dtype)?;
        let root = peer(m, root)?;
        buffer(m, "sendbuff", send, count * dtype.size())?;
        if m.rank() == root {
            buffer(m, "recvbuff", recv, count * dtype.size())?;
        }
        Ok(Op::Reduce {
            send,
            recv,
            count,
            dtype,
            op,
            root,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclAllGather(
    send: u64,
    recv: u64,
    count: usize,
    datatype: c_int,
    comm: usize,
    stream: usize,
) -> NcclResult {
    call("ncclAllGather", comm, stream, |m| {
        trace!(
            "ncclAllGather",
            "rank={} count={count} dtype={datatype}",
            m.rank()
        );
        let dtype = dtype(datatype)?;
        buffer(m, "sendbuff", send, count * dtype.size())?;
        buffer(m, "recvbuff", recv, count * m.size() * dtype.size())?;
        Ok(Op::AllGather {
            send,
            recv,
            count,
            dtype,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclReduceScatter(
    send: u64,
    recv: u64,
    count: usize,
    datatype: c_int,
    op: c_int,
    comm: usize,
    stream: usize,
) -> NcclResult {
    call("ncclReduceScatter", comm, stream, |m| {
        trace!(
            "ncclReduceScatter",
            "rank={} count={count} dtype={datatype} op={op}",
            m.rank()
        );
        let dtype = dtype(datatype)?;
        let op = redop(m, op, dtype)?;
        buffer(m, "sendbuff", send, count * m.size() * dtype.size())?;
        buffer(m, "recvbuff", recv, count * dtype.size())?;
        Ok(Op::ReduceScatter {
            send,
            recv,
            count,
            dtype,
            op,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclSend(
    buf: u64,
    count: usize,
    datatype: c_int,
    to: c_int,
    comm: usize,
    stream: usize,
) -> NcclResult {
    call("ncclSend", comm, stream, |m| {
        trace!(
            "ncclSend",
            "rank={} peer={to} count={count} dtype={datatype}",
            m.rank()
        );
        let dtype = dtype(datatype)?;
        let peer = peer(m, to)?;
        buffer(m, "sendbuff", buf, count * dtype.size())?;
        Ok(Op::Send {
            buf,
            count,
            dtype,
            peer,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclRecv(
    buf: u64,
    count: usize,
    datatype: c_int,
    from: c_int,
    comm: usize,
    stream: usize,
) -> NcclResult {
    call("ncclRecv", comm, stream, |m| {
        trace!(
            "ncclRecv",
            "rank={} peer={from} count={count} dtype={datatype}",
            m.rank()
        );
        let dtype = dtype(datatype)?;
        let peer = peer(m, from)?;
        buffer(m, "recvbuff", buf, count * dtype.size())?;
        Ok(Op::Recv {
            buf,
            count,
            dtype,
            peer,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGroupStart() -> NcclResult {
    trace!("ncclGroupStart");
    group::start();
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGroupEnd() -> NcclResult {
    trace!("ncclGroupEnd");
    let members = group::members();
    let outcome = injected("ncclGroupEnd", members.first().map(|m| m.rank()));
    let outcome = match outcome {
        Err(failure) => {
            group::discard();
            Err(failure)
        }
        Ok(()) => group::end(),
    };
    outcome.unwrap_or_else(|failure| {
        // Each communicator of the group keeps the text for ncclGetLastError.
        members
            .iter()
            .for_each(|m| m.set_last_error(&failure.message));
        global_error(&failure.message);
        failure.code
    })
}
