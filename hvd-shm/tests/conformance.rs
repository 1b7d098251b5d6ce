//! The public conformance suite, with ranks as threads of this process, each with its own
//! mapping of the group's segment. Groups of more than 4 use the quick options (4 MiB
//! tensors) to keep the run short on 2 cores.

mod common;

use std::sync::Arc;

use hvd_core::MemoryStore;
use hvd_core::conformance::{Options, run_threads};
use hvd_shm::ShmCollective;

fn suite(size: usize, options: Options) {
    let job = format!("conformance-threads-{size}");
    let store = Arc::new(MemoryStore::new());
    let config = common::config(&job);
    run_threads(size, &options, |rank| {
        ShmCollective::connect(store.clone(), rank, size, config.clone())
    })
    .unwrap_or_else(|failure| panic!("{size} ranks: {failure}"));
    common::assert_no_leftovers(&job);
}

#[test]
fn one_rank() {
    suite(1, Options::default());
}

#[test]
fn two_ranks() {
    suite(2, Options::default());
}

#[test]
fn three_ranks() {
    suite(3, Options::default());
}

#[test]
fn four_ranks() {
    suite(4, Options::default());
}

#[test]
fn five_ranks() {
    suite(5, Options::quick());
}

#[test]
fn six_ranks() {
    suite(6, Options::quick());
}

#[test]
fn seven_ranks() {
    suite(7, Options::quick());
}

#[test]
fn eight_ranks() {
    suite(8, Options::quick());
}
