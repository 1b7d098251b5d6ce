//! An NCCL communicator: made non-blocking (so every wait on it is hvd's, with a
//! deadline), its asynchronous state, splits, and its end.

use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::{Duration, Instant};

use crate::library::{self, Config, Nccl, UniqueId};

/// What `ncclCommGetAsyncError` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    Ready,
    InProgress,
    /// Failed, in NCCL's words.
    Failed(String),
}

/// One rank's NCCL communicator.
#[derive(Debug)]
pub(crate) struct Communicator {
    pub nccl: &'static Nccl,
    pub handle: library::Comm,
}

// SAFETY: NCCL communicators may be used from any thread, one call at a time, which the
// transport's lock ensures.
unsafe impl Send for Communicator {}
// SAFETY: as above.
unsafe impl Sync for Communicator {}

/// How long to sleep between polls of a communicator that is still in progress.
const POLL: Duration = Duration::from_micros(50);

impl Communicator {
    /// Starts joining the communicator of `id` as `rank` of `size` (the device's context
    /// must be current); [`wait`](Self::wait) for it to finish.
    pub(crate) fn start(
        nccl: &'static Nccl,
        id: UniqueId,
        rank: usize,
        size: usize,
    ) -> Result<Communicator, String> {
        let mut handle: library::Comm = std::ptr::null_mut();
        let mut config = Config::non_blocking();
        // SAFETY: `handle` and `config` are valid for the call; the id goes by value.
        let status = unsafe {
            (nccl.comm_init_rank_config)(&mut handle, size as c_int, id, rank as c_int, &mut config)
        };
        let comm = Communicator { nccl, handle };
        match status {
            library::SUCCESS | library::IN_PROGRESS => Ok(comm),
            code => {
                let text = comm.nccl.describe(code, comm.handle);
                if !handle.is_null() {
                    comm.abort();
                }
                Err(text)
            }
        }
    }

    /// The communicator's asynchronous state.
    pub(crate) fn state(&self) -> State {
        let mut error: c_int = 0;
        // SAFETY: a live communicator; writes one result.
        let status = unsafe { (self.nccl.comm_get_async_error)(self.handle, &mut error) };
        let code = if status == library::SUCCESS {
            error
        } else {
            status
        };
        match code {
            library::SUCCESS => State::Ready,
            library::IN_PROGRESS => State::InProgress,
            code => State::Failed(self.nccl.describe(code, self.handle)),
        }
    }

    /// Waits until the communicator is no longer in progress, or `timeout` has passed
    /// (`InProgress` then).
    pub(crate) fn wait(&self, timeout: Duration) -> State {
        let started = Instant::now();
        loop {
            let state = self.state();
            if state != State::InProgress || started.elapsed() >= timeout {
                return state;
            }
            std::thread::sleep(POLL);
        }
    }

    /// This rank's part of `ncclCommSplit` (non-blocking): a communicator of the ranks
    /// that pass the same `color`, ordered by `key`, none for `SPLIT_NOCOLOR`. The new
    /// communicator is not there yet: wait for this one (the parent), then
    /// [`finish`](PendingSplit::finish) the split.
    pub(crate) fn split(&self, color: c_int, key: c_int) -> Result<PendingSplit, String> {
        let pending = PendingSplit {
            nccl: self.nccl,
            slot: Box::new(AtomicPtr::new(std::ptr::null_mut())),
        };
        let mut config = Config::non_blocking();
        // SAFETY: a live communicator; the slot outlives NCCL's write into it (see
        // `PendingSplit`), and NCCL reads `config` before it returns.
        let status = unsafe {
            (self.nccl.comm_split)(self.handle, color, key, pending.slot.as_ptr(), &mut config)
        };
        match status {
            library::SUCCESS | library::IN_PROGRESS => Ok(pending),
            code => Err(self.nccl.describe(code, self.handle)),
        }
    }

    /// The number of ranks, as NCCL counts them.
    pub(crate) fn count(&self) -> Option<usize> {
        let mut count: c_int = 0;
        // SAFETY: a live communicator; writes one int.
        let status = unsafe { (self.nccl.comm_count)(self.handle, &mut count) };
        (status == library::SUCCESS).then_some(count as usize)
    }

    /// Ends the communicator at once, ending whatever of its work is stuck.
    pub(crate) fn abort(&self) {
        // SAFETY: a live communicator, not used after this.
        unsafe { (self.nccl.comm_abort)(self.handle) };
    }

    /// Ends a healthy communicator whose work has all finished.
    pub(crate) fn destroy(&self) {
        // SAFETY: a live communicator, not used after this.
        unsafe { (self.nccl.comm_destroy)(self.handle) };
    }
}

/// A split NCCL is still forming. NCCL 2.28 sets the caller's `newcomm` to null before
/// `ncclCommSplit` returns and writes the new communicator into it from its own thread
/// when the split ends (in success or failure), before it marks the parent ready. So the
/// slot lives on the heap, and is read only once the parent is no longer in progress.
#[derive(Debug)]
pub(crate) struct PendingSplit {
    nccl: &'static Nccl,
    slot: Box<AtomicPtr<std::ffi::c_void>>,
}

impl PendingSplit {
    /// The new communicator, once the parent is no longer in progress: none for a rank
    /// that passed `SPLIT_NOCOLOR`.
    pub(crate) fn finish(self) -> Option<Communicator> {
        let handle = self.slot.load(Ordering::Acquire);
        (!handle.is_null()).then_some(Communicator {
            nccl: self.nccl,
            handle,
        })
    }

    /// Gives up on a split whose parent never settled: NCCL may still write the slot, so
    /// it is never freed (a few bytes, once, on a job that is failing).
    pub(crate) fn abandon(self) {
        Box::leak(self.slot);
    }
}
