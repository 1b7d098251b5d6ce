//! A store inside one process, for ranks that are threads.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::{Deadline, Store, parse_counter, timeout_error};
use crate::{Error, Result};

/// An in-memory [`Store`]; share it between threads with an `Arc`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, HashMap<String, Vec<u8>>>> {
        self.entries
            .lock()
            .map_err(|_| Error::Store("a thread panicked while holding the store".into()))
    }
}

impl Store for MemoryStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.lock()?.insert(key.to_owned(), value.to_vec());
        self.changed.notify_all();
        Ok(())
    }

    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let deadline = Deadline::after(timeout);
        let mut entries = self.lock()?;
        loop {
            if let Some(value) = entries.get(key) {
                return Ok(value.clone());
            }
            let left = deadline.left();
            if left.is_zero() {
                return Err(timeout_error(key, timeout));
            }
            entries = self
                .changed
                .wait_timeout(entries, left)
                .map_err(|_| Error::Store("a thread panicked while holding the store".into()))?
                .0;
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.lock()?.get(key).cloned())
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let mut entries = self.lock()?;
        let current = match entries.get(key) {
            Some(bytes) => parse_counter(key, bytes)?,
            None => 0,
        };
        let value = current.wrapping_add(delta);
        entries.insert(key.to_owned(), value.to_string().into_bytes());
        drop(entries);
        self.changed.notify_all();
        Ok(value)
    }

    fn delete(&self, key: &str) -> Result<bool> {
        Ok(self.lock()?.remove(key).is_some())
    }
}
