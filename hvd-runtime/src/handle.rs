//! Handles: how an asynchronous collective's result comes back to the caller.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hvd_core::{Error, Result};

use super::drive::Driver;
use super::poll::{HANDLE_POLL, poll_until};
use super::request::Name;

/// The outcome of one operation, and whether a waiter sleeps on it.
struct Outcome<T> {
    result: Option<Result<T>>,
    /// Set by a waiter before it sleeps: only then does completing wake anyone (a wake-up
    /// is a system call, and most operations complete while their caller polls).
    sleeping: bool,
}

/// Where the engine leaves the outcome of one operation.
pub(crate) struct Slot<T> {
    state: Mutex<Outcome<T>>,
    done: Condvar,
    /// Set once the outcome is in, so a waiter can poll without taking the lock.
    completed: AtomicBool,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            state: Mutex::new(Outcome {
                result: None,
                sleeping: false,
            }),
            done: Condvar::new(),
            completed: AtomicBool::new(false),
        }
    }
}

impl<T> Slot<T> {
    fn lock(&self) -> MutexGuard<'_, Outcome<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Completes the operation; only the first completion counts.
    pub(crate) fn complete(&self, outcome: Result<T>) {
        let mut state = self.lock();
        if state.result.is_none() {
            state.result = Some(outcome);
            self.completed.store(true, Ordering::Release);
            if state.sleeping {
                self.done.notify_all();
            }
        }
    }
}

/// The background thread's side of a [`Slot`]: what completes it. Dropping one that has
/// not completed (a panic in the background thread, a bug) fails the slot, so a caller
/// never waits forever for work that no longer exists.
pub(crate) struct Completion<T>(Arc<Slot<T>>);

impl<T> Completion<T> {
    /// Completes the operation; only the first completion counts.
    pub(crate) fn complete(&self, outcome: Result<T>) {
        self.0.complete(outcome);
    }
}

impl<T> Drop for Completion<T> {
    fn drop(&mut self) {
        self.0.complete(Err(Error::Shutdown {
            cause: "the operation was abandoned: hvd's engine failed while it ran (the next call says why)".into(),
        }));
    }
}

/// A new slot, and the completion the background thread completes it through.
pub(crate) fn slot<T>() -> (Arc<Slot<T>>, Completion<T>) {
    let slot = Arc::new(Slot::default());
    (slot.clone(), Completion(slot))
}

/// The result of an asynchronous collective, available once the operation completes on
/// this rank. Dropping a handle does not cancel the operation (the other ranks rely on it).
#[must_use = "a collective's result is only available through its handle"]
pub struct Handle<T> {
    slot: Arc<Slot<T>>,
    /// The operation and the tensor's name, for `Debug` (formatted only there: a handle
    /// is made per tensor per step).
    op: &'static str,
    name: Name,
    /// The engine this operation runs on, which a waiting caller may step itself, and
    /// the submission's number there.
    driver: Option<(Arc<Driver>, u64)>,
}

impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("operation", &format_args!("{} of '{}'", self.op, self.name))
            .field("done", &self.poll())
            .finish()
    }
}

impl<T> Handle<T> {
    pub(crate) fn new(
        slot: Arc<Slot<T>>,
        op: &'static str,
        name: Name,
        driver: Option<(Arc<Driver>, u64)>,
    ) -> Self {
        Handle {
            slot,
            op,
            name,
            driver,
        }
    }

    /// Whether the operation has completed (successfully or not).
    pub fn poll(&self) -> bool {
        self.slot.completed.load(Ordering::Acquire)
    }

    /// Waits for the operation and returns its result.
    ///
    /// The runtime bounds every operation: a tensor that some rank never submits fails
    /// after the stall shutdown time, and a lost rank fails everything at once.
    pub fn wait(self) -> Result<T> {
        let waiting = self.driver.as_ref().map(|(driver, submission)| {
            let waiting = driver.caller_waits();
            driver.drive_until(*submission, || self.slot.completed.load(Ordering::Acquire));
            waiting
        });
        poll_until(HANDLE_POLL, || self.slot.completed.load(Ordering::Acquire));
        drop(waiting);
        let mut state = self.slot.lock();
        loop {
            if let Some(outcome) = state.result.take() {
                return outcome;
            }
            state.sleeping = true;
            state = self
                .slot
                .done
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Like [`wait`](Self::wait), but gives up after `timeout`, returning the handle so the
    /// caller can wait again.
    pub fn wait_timeout(self, timeout: Duration) -> std::result::Result<Result<T>, Self> {
        let driver = self.driver.as_ref().map(|(driver, _)| driver.clone());
        let _waiting = driver.as_ref().map(|driver| driver.caller_waits());
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.slot.lock();
        loop {
            if let Some(outcome) = state.result.take() {
                drop(state);
                return Ok(outcome);
            }
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                drop(state);
                return Err(self);
            }
            state.sleeping = true;
            state = self
                .slot
                .done
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
