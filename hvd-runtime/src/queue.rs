//! The queue between the threads that submit collectives and the background thread that
//! runs them.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hvd_core::{DType, Device, Error, Result};
use rustc_hash::FxHashSet;

use super::poll::{QUEUE_POLL, poll_until};
use super::request::{Name, Op, Request};
use super::work::Work;

/// A burst counts as over once the queue has not grown for this share of the cycle time.
/// Not one yield: on a host with idle cores a yield returns sooner than the submitting
/// thread makes its next tensor, and a burst split over many cycles pays a device round
/// trip (a wait for the GPU) per cycle instead of one.
const SETTLE_QUIET_SHARE: u32 = 10;

/// One submitted collective: what the ranks negotiate, and what this rank runs.
pub(crate) struct Submission {
    pub request: Request,
    pub work: Work,
}

impl Submission {
    /// The submission of `op` for the tensor `name` of `dtype` and `shape` on `device`,
    /// its result going to `work`.
    pub fn new(
        name: &str,
        op: Op,
        work: Work,
        dtype: DType,
        shape: Vec<usize>,
        device: Device,
    ) -> Self {
        let mut request = Request::new(name, op, dtype, shape);
        request.device = device;
        Submission { request, work }
    }

    /// The submission of an operation without a tensor.
    pub fn control(name: String, op: Op, work: Work) -> Self {
        Submission {
            request: Request::control(name, op),
            work,
        }
    }
}

#[derive(Default)]
struct State {
    submissions: Vec<Submission>,
    /// Names submitted and not yet completed: a second submission of one is refused.
    in_flight: FxHashSet<Name>,
    shutdown_requested: bool,
    /// Submissions so far: the newest one's number.
    submitted: u64,
    /// Set once the engine has stopped: the reason every later call fails with.
    stopped: Option<Error>,
}

/// Submissions waiting for the background thread.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    wake: Condvar,
    /// Set with every submission and shutdown request, so the background thread can poll
    /// for work without taking the lock.
    work: AtomicBool,
    /// The number of the newest submission while it is queued, else 0 (numbers start at
    /// 1): a caller waiting on exactly that one may run the cycle itself.
    newest_queued: AtomicU64,
    /// Callers blocked on a handle of this set: a caller that waits has finished its
    /// burst, so the background thread stops letting one settle.
    waiting_callers: AtomicUsize,
}

/// A caller counted as waiting on a handle, for as long as this lives.
pub(crate) struct Waiting<'a>(&'a Queue);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting_callers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a submission and returns its number; refused at once when its name is
    /// already in flight or the engine has stopped.
    pub fn submit(&self, rank: usize, submission: Submission) -> Result<u64> {
        let mut state = self.lock();
        if let Some(err) = &state.stopped {
            return Err(err.clone());
        }
        let name = &submission.request.name;
        if !state.in_flight.insert(name.clone()) {
            return Err(Error::invalid(
                rank,
                submission.request.kind().name(),
                name.to_string(),
                "a collective with this name is already in flight; names must be unique until their handles complete",
            ));
        }
        state.submissions.push(submission);
        state.submitted += 1;
        let number = state.submitted;
        self.newest_queued.store(number, Ordering::Release);
        self.work.store(true, Ordering::Release);
        // The background thread only sleeps on an empty queue: wake it on the first
        // submission, not on every one of a burst.
        if state.submissions.len() == 1 {
            self.wake.notify_all();
        }
        Ok(number)
    }

    /// The number of the newest submission while it is still queued, else 0.
    /// Counts the calling thread as waiting on a handle until the guard drops.
    pub fn caller_waits(&self) -> Waiting<'_> {
        self.waiting_callers.fetch_add(1, Ordering::AcqRel);
        Waiting(self)
    }

    fn callers_wait(&self) -> bool {
        self.waiting_callers.load(Ordering::Acquire) > 0
    }

    pub fn newest_queued(&self) -> u64 {
        self.newest_queued.load(Ordering::Acquire)
    }

    /// Waits up to `cycle` for something to take: parked, after polling for a moment when
    /// `busy` (the last cycle took or completed work, so more is likely to follow at once;
    /// an idle job costs no polling).
    pub fn wait_for_work(&self, cycle: Duration, busy: bool) {
        let start = Instant::now();
        if busy && poll_until(QUEUE_POLL.min(cycle), || self.work.load(Ordering::Acquire)) {
            return;
        }
        let state = self.lock();
        if state.submissions.is_empty() && !state.shutdown_requested {
            // Yields on a loaded core can outlast the poll's budget: the whole wait,
            // polled and parked, stays within one cycle.
            drop(
                self.wake
                    .wait_timeout(state, cycle.saturating_sub(start.elapsed()))
                    .unwrap_or_else(|e| e.into_inner()),
            );
        }
    }

    /// A burst (a backward pass releasing its gradients) may still be arriving: gives the
    /// submitting threads the core until the queue has stopped growing for a tenth of
    /// `cycle`, and for at most `cycle`, so the burst travels in one cycle instead of many.
    /// It ends at once when a caller waits on a handle (its burst is over; the step cannot
    /// go on until the cycle runs), and a caller that waits on its lone tensor takes it
    /// meanwhile and runs it itself.
    pub fn settle(&self, cycle: Duration) {
        let start = Instant::now();
        let quiet = cycle / SETTLE_QUIET_SHARE;
        let (mut seen, mut grew) = (self.lock().submissions.len(), start);
        while seen > 0 && start.elapsed() < cycle && !self.callers_wait() {
            std::thread::yield_now();
            let now = self.lock().submissions.len();
            if now != seen {
                (seen, grew) = (now, Instant::now());
            } else if grew.elapsed() >= quiet {
                return;
            }
        }
    }

    /// Takes everything submitted, first waiting up to `wait` for something (parked, no
    /// polling). Returns whether a shutdown was requested.
    pub fn take(&self, wait: Duration) -> (Vec<Submission>, bool) {
        if !wait.is_zero() {
            self.wait_for_work(wait, false);
        }
        let mut state = self.lock();
        self.work.store(state.shutdown_requested, Ordering::Release);
        self.newest_queued.store(0, Ordering::Release);
        (
            std::mem::take(&mut state.submissions),
            state.shutdown_requested,
        )
    }

    /// Waits up to `timeout` for a submission or a [`nudge`](Self::nudge), whatever is
    /// queued already.
    pub fn wait_for_change(&self, timeout: Duration) {
        let state = self.lock();
        drop(
            self.wake
                .wait_timeout(state, timeout)
                .unwrap_or_else(|e| e.into_inner()),
        );
    }

    /// Wakes the thread waiting for work or for a change, to look again.
    pub fn nudge(&self) {
        let _state = self.lock();
        self.wake.notify_all();
    }

    /// Marks `names` completed, so they can be used again; returns how many there were.
    /// One lock for a cycle's worth of names.
    pub fn finished<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> u64 {
        let mut state = self.lock();
        let mut count = 0;
        for name in names {
            state.in_flight.remove(name);
            count += 1;
        }
        count
    }

    /// Asks the background thread to leave the job.
    pub fn request_shutdown(&self) {
        self.lock().shutdown_requested = true;
        self.work.store(true, Ordering::Release);
        self.wake.notify_all();
    }

    /// Why the engine stopped, once it has.
    pub fn stopped(&self) -> Option<Error> {
        self.lock().stopped.clone()
    }

    /// Records why the engine stopped; later submissions fail with it. Returns whatever
    /// was still queued, to be failed too.
    pub fn stop(&self, reason: Error) -> Vec<Submission> {
        let mut state = self.lock();
        state.stopped.get_or_insert(reason);
        state.in_flight.clear();
        std::mem::take(&mut state.submissions)
    }
}
