//! Opaque handles (`CUstream`, `CUevent`, `ncclComm_t`) for objects the double owns:
//! numbers never reused, looked up in a table, so a stale or made-up handle is an error
//! rather than a dangling pointer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Handles start here, far from the special values CUDA gives small numbers (the legacy
/// and per-thread default streams are 0x1 and 0x2).
const FIRST: usize = 0x10_0000;

#[derive(Debug)]
pub(crate) struct Handles<T> {
    next: AtomicUsize,
    live: Mutex<Option<HashMap<usize, Arc<T>>>>,
}

impl<T> Handles<T> {
    pub(crate) const fn new() -> Self {
        Handles {
            next: AtomicUsize::new(FIRST),
            live: Mutex::new(None),
        }
    }

    /// Registers `object` and returns its new handle.
    pub(crate) fn insert(&self, object: Arc<T>) -> usize {
        let handle = self.next.fetch_add(16, Ordering::Relaxed);
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.get_or_insert_with(HashMap::new).insert(handle, object);
        handle
    }

    pub(crate) fn get(&self, handle: usize) -> Option<Arc<T>> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.as_ref()?.get(&handle).cloned()
    }

    pub(crate) fn remove(&self, handle: usize) -> Option<Arc<T>> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.as_mut()?.remove(&handle)
    }
}
