//! Communicators: one rank's membership of a segment, its asynchronous state
//! (`ncclCommGetAsyncError`), initialisation (blocking or not), splits and aborts.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::host::{self, Place};
use super::reduce::{Dtype, RedOp};
use super::segment::{GONE, JOINED, Segment, Stop, wait_for_all};
use super::{Failure, IN_PROGRESS, INVALID_USAGE, REMOTE_ERROR, SUCCESS, SYSTEM_ERROR};
use crate::handles::Handles;

pub(crate) static COMMS: Handles<Member> = Handles::new();

/// `ncclUniqueId`: 128 bytes naming the segment.
pub(crate) const ID_BYTES: usize = 128;
const ID_MAGIC: &[u8; 8] = b"HVDGPUDB";

/// The segment name a unique id carries, if it is one of ours.
pub(crate) fn name_of_id(id: &[u8; ID_BYTES]) -> Option<String> {
    if &id[..8] != ID_MAGIC {
        return None;
    }
    let token = u64::from_ne_bytes(id[8..16].try_into().ok()?);
    Some(format!("/hvd-gpu-double-{token:016x}"))
}

/// A fresh unique id.
pub(crate) fn new_id() -> [u8; ID_BYTES] {
    static MADE: AtomicU32 = AtomicU32::new(0);
    let mut seed = [0u8; 8];
    // SAFETY: getrandom writes at most the 8 bytes it is given.
    let got = unsafe { libc::getrandom(seed.as_mut_ptr().cast(), 8, 0) };
    let mut token = u64::from_ne_bytes(seed);
    if got != 8 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        token = now ^ (u64::from(std::process::id()) << 32);
    }
    token ^= u64::from(MADE.fetch_add(1, Ordering::Relaxed));
    let mut id = [0u8; ID_BYTES];
    id[..8].copy_from_slice(ID_MAGIC);
    id[8..16].copy_from_slice(&token.to_ne_bytes());
    id
}

/// What `ncclCommGetAsyncError` reports.
#[derive(Debug, Default)]
struct Status {
    error: Option<Failure>,
    /// Background work (initialisation, a non-blocking enqueue) still running.
    pending: u32,
}

/// The stream side's own state: barriers passed and signature parity.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    pub barriers: u32,
    pub calls: u64,
}

/// One rank of a communicator.
#[derive(Debug)]
pub(crate) struct Member {
    /// This rank and the communicator's size: known at once for `ncclCommInitRank`,
    /// after the exchange for `ncclCommSplit`.
    place: OnceLock<(usize, usize)>,
    pub ordinal: u32,
    pub blocking: bool,
    segment: OnceLock<Segment>,
    status: Mutex<Status>,
    pub aborted: AtomicBool,
    /// Serialises this rank's collectives on the segment.
    pub wire: Mutex<Wire>,
    /// Stream tasks queued and not yet run.
    pub outstanding: AtomicU32,
    splits: AtomicU32,
    /// Calls of `ncclCommGetAsyncError` on this communicator.
    polls: AtomicU32,
    next_op: AtomicI32,
    pub redops: Mutex<HashMap<i32, (Dtype, RedOp)>>,
    last_error: Mutex<CString>,
}

impl Member {
    pub(crate) fn new(place: Option<(usize, usize)>, ordinal: u32, blocking: bool) -> Arc<Member> {
        let known = OnceLock::new();
        if let Some(place) = place {
            let _ = known.set(place);
        }
        Arc::new(Member {
            place: known,
            ordinal,
            blocking,
            segment: OnceLock::new(),
            status: Mutex::new(Status::default()),
            aborted: AtomicBool::new(false),
            wire: Mutex::new(Wire::default()),
            outstanding: AtomicU32::new(0),
            splits: AtomicU32::new(0),
            polls: AtomicU32::new(0),
            next_op: AtomicI32::new(5),
            redops: Mutex::new(HashMap::new()),
            last_error: Mutex::new(CString::default()),
        })
    }

    /// This rank (0 until placed).
    pub(crate) fn rank(&self) -> usize {
        self.place.get().map_or(0, |p| p.0)
    }

    /// The communicator's size (0 until placed).
    pub(crate) fn size(&self) -> usize {
        self.place.get().map_or(0, |p| p.1)
    }

    /// Places a split's new rank once the ranks have agreed on it.
    pub(crate) fn place(&self, rank: usize, size: usize) {
        let _ = self.place.set((rank, size));
    }

    pub(crate) fn segment(&self) -> Option<&Segment> {
        self.segment.get()
    }

    fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ncclCommGetAsyncError`: an error, else in progress while background work runs.
    pub(crate) fn async_error(&self) -> i32 {
        let status = self.status();
        match (&status.error, status.pending) {
            (Some(failure), _) => failure.code,
            (None, 0) => SUCCESS,
            (None, _) => IN_PROGRESS,
        }
    }

    /// Whether an asynchronous error has been recorded.
    pub(crate) fn has_failed(&self) -> bool {
        self.status().error.is_some()
    }

    /// Records an asynchronous error (the first one stays).
    pub(crate) fn fail(&self, failure: Failure) {
        let mut status = self.status();
        if status.error.is_none() {
            self.set_last_error(&failure.message);
            status.error = Some(failure);
        }
    }

    /// Counts a look at the asynchronous state.
    pub(crate) fn polled(&self) {
        self.polls.fetch_add(1, Ordering::AcqRel);
    }

    /// Looks at the asynchronous state so far.
    pub(crate) fn polls(&self) -> u32 {
        self.polls.load(Ordering::Acquire)
    }

    /// Waits until the state has been looked at more than `seen` times, or `at_most`.
    pub(crate) fn await_poll_after(&self, seen: u32, at_most: Duration) {
        let deadline = std::time::Instant::now() + at_most;
        while self.polls() == seen && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    pub(crate) fn begin_background(&self) {
        self.status().pending += 1;
    }

    pub(crate) fn end_background(&self) {
        let mut status = self.status();
        status.pending = status.pending.saturating_sub(1);
    }

    pub(crate) fn set_last_error(&self, text: &str) {
        let text = CString::new(text.replace('\0', " ")).unwrap_or_default();
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }

    /// The last error's text, valid until the next error of this communicator.
    pub(crate) fn last_error(&self) -> *const libc::c_char {
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ptr()
    }

    /// Why this communicator cannot take a call now, if it cannot.
    pub(crate) fn usable(&self) -> Result<(), Failure> {
        let status = self.status();
        if let Some(failure) = &status.error {
            return Err(Failure::new(
                INVALID_USAGE,
                format!(
                    "the communicator has failed and must be aborted: {}",
                    failure.message
                ),
            ));
        }
        if status.pending > 0 {
            return Err(Failure::new(
                INVALID_USAGE,
                "the communicator's previous call is still in progress: wait until \
                 ncclCommGetAsyncError no longer returns ncclInProgress",
            ));
        }
        if self.segment().is_none() {
            return Err(Failure::new(
                INVALID_USAGE,
                "the communicator is not initialised",
            ));
        }
        Ok(())
    }

    /// A new id for a reduction operator made for this communicator.
    pub(crate) fn new_redop(&self, dtype: Dtype, op: RedOp) -> i32 {
        let id = self.next_op.fetch_add(1, Ordering::Relaxed);
        self.redops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (dtype, op));
        id
    }

    /// Joins the segment `name` as this rank, creating it when this is rank 0, and waits
    /// for every rank to join.
    pub(crate) fn join(&self, name: &str) -> Result<(), Failure> {
        let segment = self.attach(name)?;
        let control = segment.control(self.rank());
        let pid = std::process::id();
        if control
            .pid
            .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Failure::new(
                INVALID_USAGE,
                format!(
                    "rank {} of communicator {name} joined twice (two callers were given the same rank?)",
                    self.rank()
                ),
            ));
        }
        control.host.store(host::host_hash(), Ordering::Relaxed);
        control.device.store(self.ordinal, Ordering::Relaxed);
        control.state.store(JOINED, Ordering::Release);
        segment.attached().fetch_add(1, Ordering::AcqRel);
        let size = self.size() as u32;
        let joined = wait_for_all(&segment, self.rank(), &self.aborted, |_| {
            segment.attached().load(Ordering::Acquire) >= size
        });
        // Whether everyone came or not, no one may join any more.
        segment.unlink();
        joined.map_err(|stop| stop_failure(stop, "initialisation"))?;
        let places: Vec<Place> = (0..self.size())
            .map(|r| {
                let c = segment.control(r);
                Place {
                    pid: c.pid.load(Ordering::Acquire),
                    host: c.host.load(Ordering::Relaxed),
                    device: c.device.load(Ordering::Relaxed),
                }
            })
            .collect();
        host::check_devices(self.rank(), &places, crate::inject::nccl_version())?;
        let _ = self.segment.set(segment);
        Ok(())
    }

    fn attach(&self, name: &str) -> Result<Segment, Failure> {
        let system = |e: std::io::Error| {
            Failure::new(SYSTEM_ERROR, format!("shared-memory segment {name}: {e}"))
        };
        let segment = if self.rank() == 0 {
            Segment::create(name, self.size()).map_err(system)?
        } else {
            let mut pause = Duration::from_micros(100);
            loop {
                if let Some(segment) = Segment::open(name).map_err(system)? {
                    break segment;
                }
                if self.aborted.load(Ordering::Acquire) {
                    return Err(Failure::new(SYSTEM_ERROR, "aborted during initialisation"));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
        };
        if segment.size() != self.size() {
            return Err(Failure::new(
                INVALID_USAGE,
                format!(
                    "rank {} was told the communicator has {} ranks, rank 0 made it for {}",
                    self.rank(),
                    self.size(),
                    segment.size()
                ),
            ));
        }
        Ok(segment)
    }

    /// This rank's part of `ncclCommSplit` on the host: agrees every rank's color and
    /// key, and returns the segment name, rank and size of this rank's new communicator
    /// (none for `NCCL_SPLIT_NOCOLOR`).
    pub(crate) fn split_exchange(
        &self,
        color: i32,
        key: i32,
    ) -> Result<Option<(String, usize, usize)>, Failure> {
        let segment = self
            .segment()
            .ok_or_else(|| Failure::new(INVALID_USAGE, "the communicator is not initialised"))?;
        let index = self.splits.fetch_add(1, Ordering::AcqRel) + 1;
        let me = segment.control(self.rank());
        me.color.store(color, Ordering::Relaxed);
        me.key.store(key, Ordering::Relaxed);
        // Two phases per split: everyone's color is written, then everyone has read them
        // (so the next split may overwrite them).
        let phase = |p: u32| {
            me.split.store(p, Ordering::Release);
            wait_for_all(segment, self.rank(), &self.aborted, |c| {
                c.split.load(Ordering::Acquire).wrapping_sub(p) as i32 >= 0
            })
            .map_err(|stop| stop_failure(stop, "ncclCommSplit"))
        };
        phase(2 * index - 1)?;
        let choices: Vec<(i32, i32)> = (0..self.size())
            .map(|r| {
                let c = segment.control(r);
                (
                    c.color.load(Ordering::Relaxed),
                    c.key.load(Ordering::Relaxed),
                )
            })
            .collect();
        phase(2 * index)?;
        if color < 0 {
            return Ok(None);
        }
        let mut group: Vec<usize> = (0..self.size())
            .filter(|r| choices[*r].0 == color)
            .collect();
        group.sort_by_key(|r| (choices[*r].1, *r));
        let rank = group.iter().position(|r| *r == self.rank()).unwrap_or(0);
        let name = format!("{}-s{index}-c{color}", segment.name());
        Ok(Some((name, rank, group.len())))
    }

    /// Marks this rank gone: its peers' waits end with an error naming it.
    pub(crate) fn leave(&self, abort: bool) {
        if abort {
            self.aborted.store(true, Ordering::Release);
        }
        if let Some(segment) = self.segment() {
            segment
                .control(self.rank())
                .state
                .store(GONE, Ordering::Release);
            segment.unlink();
        }
    }
}

/// The asynchronous error a wait that ended early becomes.
pub(crate) fn stop_failure(stop: Stop, during: &str) -> Failure {
    match stop {
        Stop::Aborted => Failure::new(
            SYSTEM_ERROR,
            format!("communicator aborted during {during}"),
        ),
        Stop::Left(rank) => Failure::new(
            REMOTE_ERROR,
            format!("rank {rank} left the communicator (aborted or destroyed it) during {during}"),
        ),
        Stop::Exited(rank, pid) => Failure::new(
            REMOTE_ERROR,
            format!("rank {rank}'s process (pid {pid}) exited during {during}"),
        ),
    }
}

/// Runs `work` for `member` now (blocking) or on a thread of its own, reporting through
/// `ncclCommGetAsyncError` (non-blocking); returns what the call returns.
pub(crate) fn run_or_spawn(
    member: &Arc<Member>,
    work: impl FnOnce(&Member) -> Result<(), Failure> + Send + 'static,
) -> i32 {
    if member.blocking {
        return match work(member) {
            Ok(()) => SUCCESS,
            Err(failure) => {
                let code = failure.code;
                member.fail(failure);
                code
            }
        };
    }
    member.begin_background();
    let background = member.clone();
    std::thread::spawn(move || {
        if let Err(failure) = work(&background) {
            background.fail(failure);
        }
        background.end_background();
    });
    IN_PROGRESS
}
