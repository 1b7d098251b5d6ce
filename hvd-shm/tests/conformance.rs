//! The public conformance suite, with ranks as threads of this process, each with its own
//! mapping of the group's segment. Groups of more than 4 use the quick options (4 MiB
//! tensors) to keep the run short on 2 cores.

mod common;

use std::sync::Arc;

use hvd_core::MemoryStore;
use hvd_shm::ShmCollective;
use hvd_testkit::conformance;

fn suite(size: usize) {
    let job = format!("conformance-threads-{size}");
    let store = Arc::new(MemoryStore::new());
    let config = common::config(&job);
    conformance::in_threads("shm", size, |rank| {
        ShmCollective::connect(store.clone(), rank, size, config.clone())
    });
    common::assert_no_leftovers(&job);
}

hvd_testkit::conformance_by_size!(suite);
