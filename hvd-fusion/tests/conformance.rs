//! `Fusion` over the reference transport passes the public conformance suite, with a
//! small threshold (packing, several rounds and the too-large path all run) and with
//! Horovod's default.

use hvd_core::conformance::{self, Options};
use hvd_core::reference::LocalGroup;
use hvd_fusion::{DEFAULT_THRESHOLD, Fusion};

fn run(size: usize, threshold: usize) {
    let group = LocalGroup::new(size)
        .build()
        .into_iter()
        .map(|rank| Fusion::new(rank, threshold))
        .collect();
    if let Err(failure) = conformance::run_group(group, &Options::quick()) {
        panic!("threshold {threshold}: {failure}");
    }
}

const SMALL: usize = 4 << 10;

#[test]
fn small_threshold_1_rank() {
    run(1, SMALL);
}

#[test]
fn small_threshold_2_ranks() {
    run(2, SMALL);
}

#[test]
fn small_threshold_3_ranks() {
    run(3, SMALL);
}

#[test]
fn small_threshold_4_ranks() {
    run(4, SMALL);
}

#[test]
fn default_threshold_1_rank() {
    run(1, DEFAULT_THRESHOLD);
}

#[test]
fn default_threshold_2_ranks() {
    run(2, DEFAULT_THRESHOLD);
}

#[test]
fn default_threshold_3_ranks() {
    run(3, DEFAULT_THRESHOLD);
}

#[test]
fn default_threshold_4_ranks() {
    run(4, DEFAULT_THRESHOLD);
}
