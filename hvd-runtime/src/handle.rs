//! Handles: how an asynchronous collective's result comes back to the caller.

use std::sync::Arc;
use std::time::Duration;

use hvd_core::Result;

use super::completion::Slot;
use super::drive::Driver;
use super::poll::{HANDLE_POLL, poll_until};
use super::request::Name;

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

    /// The name of the tensor (or control operation, such as `hvd.join`) it waits for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the operation has completed (successfully or not).
    pub fn poll(&self) -> bool {
        self.slot.is_complete()
    }

    /// Waits for the operation and returns its result.
    ///
    /// The runtime bounds every operation: a tensor that some rank never submits fails
    /// after the stall shutdown time, and a lost rank fails everything at once.
    pub fn wait(self) -> Result<T> {
        let waiting = self.driver.as_ref().map(|(driver, submission)| {
            let waiting = driver.caller_waits();
            driver.drive_until(*submission, || self.slot.is_complete());
            waiting
        });
        poll_until(HANDLE_POLL, || self.slot.is_complete());
        drop(waiting);
        self.slot.take()
    }

    /// Like [`wait`](Self::wait), but gives up after `timeout`, returning the handle so the
    /// caller can wait again.
    pub fn wait_timeout(self, timeout: Duration) -> std::result::Result<Result<T>, Self> {
        let driver = self.driver.as_ref().map(|(driver, _)| driver.clone());
        let _waiting = driver.as_ref().map(|driver| driver.caller_waits());
        match self.slot.take_within(timeout) {
            Some(outcome) => Ok(outcome),
            None => Err(self),
        }
    }
}
