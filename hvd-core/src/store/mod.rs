//! Rendezvous: the key-value store ranks use to find each other.
//!
//! Transports publish their listening addresses here and read their peers'; the launcher
//! serves a TCP implementation, and this module has an in-memory one (ranks as threads of
//! one process) and a shared-directory one (ranks on hosts that share a file system).

mod file;
mod memory;
mod prefix;

use std::time::{Duration, Instant};

use crate::Result;

pub use file::FileStore;
pub use memory::MemoryStore;
pub use prefix::PrefixStore;

/// A key-value store shared by every rank of a job.
///
/// Keys are UTF-8 strings; values are bytes. All operations are atomic with respect to
/// each other. Waits end in [`Error::Store`](crate::Error::Store) naming the key.
pub trait Store: Send + Sync {
    /// Sets `key` to `value`, replacing any previous value.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;

    /// The value of `key`, waiting up to `timeout` for some rank to set it.
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>>;

    /// The value of `key` if it is set now.
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// Atomically adds `delta` to the counter at `key` (a missing key counts as 0) and
    /// returns the new value. Counters are stored as decimal text.
    fn add(&self, key: &str, delta: i64) -> Result<i64>;

    /// Removes `key`; returns whether it was there.
    fn delete(&self, key: &str) -> Result<bool>;
}

impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        (**self).set(key, value)
    }
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        (**self).get(key, timeout)
    }
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        (**self).try_get(key)
    }
    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        (**self).add(key, delta)
    }
    fn delete(&self, key: &str) -> Result<bool> {
        (**self).delete(key)
    }
}

/// Parses a counter value as stored by [`Store::add`].
pub(crate) fn parse_counter(key: &str, bytes: &[u8]) -> Result<i64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            crate::Error::Store(format!(
                "key '{key}' holds {:?}, which is not a counter",
                String::from_utf8_lossy(bytes)
            ))
        })
}

/// The error of a `get` that ran out of time, the same from every store.
pub fn timeout_error(key: &str, timeout: Duration) -> crate::Error {
    crate::Error::Store(format!(
        "{TIMED_OUT}{timeout:?} waiting for key '{key}': no rank has set it"
    ))
}

const TIMED_OUT: &str = "timed out after ";

/// Whether `error` is a `get` that ran out of time ([`timeout_error`]), rather than a
/// store that failed: only the first may be reported as waiting for the key's writer.
pub fn timed_out(error: &crate::Error) -> bool {
    matches!(error, crate::Error::Store(message) if message.starts_with(TIMED_OUT))
}

/// When a wait for a key ends. A timeout too long to represent as an instant (such as
/// `Duration::MAX`, meaning "forever") never ends instead of overflowing.
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    pub(crate) fn after(timeout: Duration) -> Self {
        Deadline(Instant::now().checked_add(timeout))
    }

    /// The time left, zero once the deadline has passed.
    pub(crate) fn left(&self) -> Duration {
        self.0.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }
}
