//! The public conformance suite, with ranks as threads connected over loopback. Groups
//! of more than 4 use the quick options (4 MiB tensors) to keep the run short on 2 cores.

use std::sync::Arc;

use hvd_core::MemoryStore;
use hvd_core::conformance::{Options, run_threads};
use hvd_gloo_tcp::{TcpCollective, TcpConfig};

fn suite(size: usize, options: Options) {
    let store = Arc::new(MemoryStore::new());
    let config = TcpConfig::default();
    run_threads(size, &options, |rank| {
        TcpCollective::connect(store.clone(), rank, size, config.clone())
    })
    .unwrap_or_else(|failure| panic!("{size} ranks: {failure}"));
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
