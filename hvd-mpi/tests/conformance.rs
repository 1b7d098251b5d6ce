//! The public conformance suite, with every rank a process of an `mpirun` job.
#![cfg(feature = "mpi")]

mod mpirun;

use std::time::Duration;

use hvd_core::conformance::{Options, run_rank};
use hvd_mpi::{MpiCollective, MpiConfig};

fn conformance_under_mpirun(test: &str, np: usize, options: Options) {
    if mpirun::rank_body() {
        let group = MpiCollective::world(MpiConfig::from_env().unwrap()).unwrap();
        match run_rank(&group, &options) {
            Ok(report) => println!("PASSED {} checks", report.passed.len()),
            Err(failure) => panic!("FAILED {failure}"),
        }
        return;
    }
    let job = mpirun::job(test, np, &[], Duration::from_secs(300));
    let passed = job.output.matches("PASSED").count();
    assert!(
        job.status.is_some_and(|s| s.success()) && passed == np,
        "mpirun -np {np} ({:?} after {:?}), {passed} ranks passed:\n{}",
        job.status,
        job.took,
        job.output
    );
}

#[test]
fn conformance_under_mpirun_np2() {
    conformance_under_mpirun("conformance_under_mpirun_np2", 2, Options::default());
}

#[test]
fn conformance_under_mpirun_np4_oversubscribed() {
    conformance_under_mpirun(
        "conformance_under_mpirun_np4_oversubscribed",
        4,
        Options::quick(),
    );
}
