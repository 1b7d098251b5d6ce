//! Ranks as threads of the test: each connects in its own thread, since joining a group
//! blocks until every rank has arrived.

use std::sync::Arc;
use std::thread;

use hvd_core::{MemoryStore, Result, Store};

/// Connects the `size` ranks of a group, each in its own thread, all meeting in one new
/// in-memory store: `connect(store, rank)` joins one. Returns each rank's outcome.
pub fn connect_all<C: Send>(
    size: usize,
    connect: impl Fn(Arc<dyn Store>, usize) -> Result<C> + Sync,
) -> Vec<Result<C>> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    thread::scope(|scope| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let (store, connect) = (store.clone(), &connect);
                scope.spawn(move || connect(store, rank))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked while connecting"))
            .collect()
    })
}
