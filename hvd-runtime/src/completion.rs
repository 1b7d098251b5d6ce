//! [`Slot`] and [`Completion`]: where the engine leaves an operation's outcome and how a
//! caller waits for it. A leaf, so that the work the engine runs and the handles callers
//! hold both reach it without reaching each other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hvd_core::{Error, Result};

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
    /// Whether the outcome is in; takes no lock.
    pub(crate) fn is_complete(&self) -> bool {
        self.completed.load(Ordering::Acquire)
    }

    /// Sleeps until the outcome is in, and takes it.
    pub(crate) fn take(&self) -> Result<T> {
        let mut state = self.lock();
        loop {
            if let Some(outcome) = state.result.take() {
                return outcome;
            }
            state.sleeping = true;
            state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Like [`take`](Self::take), but gives up after `timeout`.
    pub(crate) fn take_within(&self, timeout: Duration) -> Option<Result<T>> {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.lock();
        loop {
            if let Some(outcome) = state.result.take() {
                return Some(outcome);
            }
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return None;
            }
            state.sleeping = true;
            state = self
                .done
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

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
