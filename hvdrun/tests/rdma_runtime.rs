//! The runtime over the RDMA transport (feature `rdma`), across real processes: the
//! facade picks it by `HVD_BACKEND`, and `hvdrun --check-build` lists its providers.
#![cfg(feature = "rdma")]

use std::process::Command;

use hvd::ReduceOp;
use hvdrun::{Job, JobOutcome};

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn rank_body() {
    let hvd = hvd::init().unwrap();
    let sum = hvd
        .allreduce("x", vec![hvd.rank() as f32 + 1.0; 1 << 18], ReduceOp::Sum)
        .unwrap();
    let out = std::env::var("HVD_TEST_OUT").unwrap();
    let line = format!("{} {} {}", hvd.transport(), sum[0], sum[(1 << 18) - 1]);
    std::fs::write(format!("{out}/rank{}", hvd.rank()), line).unwrap();
}

#[test]
fn the_runtime_runs_over_libfabric_when_asked() {
    for provider in ["tcp;ofi_rxm", "shm"] {
        let out = tempfile::tempdir().unwrap();
        let args = ["rank_body", "--exact", "--ignored", "--test-threads=1"];
        let outcome = Job::new(
            std::env::current_exe().unwrap(),
            args.map(String::from).to_vec(),
            3,
        )
        .env("HVD_BACKEND", "rdma")
        .env("HVD_RDMA_PROVIDER", provider)
        .env("HVD_TEST_OUT", out.path().to_str().unwrap())
        .quiet()
        .run()
        .unwrap();
        assert_eq!(outcome, JobOutcome::Success, "{provider}");
        for rank in 0..3 {
            let line = std::fs::read_to_string(out.path().join(format!("rank{rank}"))).unwrap();
            assert_eq!(line, "rdma 6 6", "{provider}, rank {rank}");
        }
    }
}

#[test]
fn check_build_lists_the_providers() {
    let out = Command::new(env!("CARGO_BIN_EXE_hvdrun"))
        .arg("--check-build")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("  rdma "))
        .unwrap_or_default();
    assert!(
        line.starts_with("  rdma  libfabric, providers: ") && line.contains("shm"),
        "{stdout}"
    );
}
