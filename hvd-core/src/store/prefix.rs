//! A namespace inside another store.

use std::time::Duration;

use super::Store;
use crate::Result;

/// Every key of the inner store prefixed with `prefix/`, so that jobs, process sets or
/// transports sharing one store never see each other's keys.
#[derive(Debug, Clone)]
pub struct PrefixStore<S> {
    inner: S,
    prefix: String,
}

impl<S: Store> PrefixStore<S> {
    pub fn new(inner: S, prefix: impl Into<String>) -> Self {
        PrefixStore {
            inner,
            prefix: prefix.into(),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}/{key}", self.prefix)
    }
}

impl<S: Store> Store for PrefixStore<S> {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.inner.set(&self.key(key), value)
    }
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        self.inner.get(&self.key(key), timeout)
    }
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.inner.try_get(&self.key(key))
    }
    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        self.inner.add(&self.key(key), delta)
    }
    fn delete(&self, key: &str) -> Result<bool> {
        self.inner.delete(&self.key(key))
    }
}
