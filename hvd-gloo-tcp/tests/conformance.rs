//! The public conformance suite, with ranks as threads connected over loopback. Groups
//! of more than 4 use the quick options (4 MiB tensors) to keep the run short on 2 cores.

use std::sync::Arc;

use hvd_core::MemoryStore;
use hvd_gloo_tcp::{TcpCollective, TcpConfig};
use hvd_testkit::conformance;

fn suite(size: usize) {
    let store = Arc::new(MemoryStore::new());
    let config = TcpConfig::default();
    conformance::in_threads("tcp", size, |rank| {
        TcpCollective::connect(store.clone(), rank, size, config.clone())
    });
}

hvd_testkit::conformance_by_size!(suite);
