//! The public conformance suite on device memory, through NCCL (the GPU test double),
//! with ranks as threads of this process.

mod common;

use hvd_core::conformance::{Options, run_threads_on};

fn suite(size: usize, options: Options) {
    let store: std::sync::Arc<dyn hvd_core::Store> =
        std::sync::Arc::new(hvd_core::MemoryStore::new());
    let config = common::config();
    run_threads_on(size, &options, |rank| {
        common::rank(store.clone(), rank, size, &config)
    })
    .unwrap_or_else(|failure| panic!("{size} ranks: {failure}"));
}

#[test]
fn one_rank() {
    suite(1, Options::quick());
}

#[test]
fn two_ranks() {
    suite(2, Options::default());
}

#[test]
fn three_ranks() {
    suite(3, Options::quick());
}

#[test]
fn four_ranks() {
    suite(4, Options::quick());
}
