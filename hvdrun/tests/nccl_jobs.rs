//! GPU jobs under hvdrun, against the GPU test double: device tensors over NCCL
//! (`HVD_BACKEND=nccl`), and staged through host memory over TCP and shared memory when
//! the job has no device transport; a rank killed in a job of device collectives is
//! named by every survivor and by the launcher.
#![cfg(feature = "nccl")]

#[path = "common/scenario.rs"]
mod scenario;

use hvd::device::DeviceVec;
use hvd::{ReduceOp, Reduction};
use hvdrun::JobOutcome;
use scenario::{rank_scenario, report_path};

/// Runs `rank_body` as `np` ranks with `scenario`, the double as both libraries and
/// `vars`.
fn launch(np: usize, scenario: &str, vars: &[(&str, &str)]) -> (JobOutcome, Vec<Option<String>>) {
    let double = hvd_gpu_double::library_path().unwrap();
    let double = double.to_str().unwrap();
    let mut all = vec![("HVD_NCCL_LIBRARY", double), ("HVD_CUDA_LIBRARY", double)];
    all.extend_from_slice(vars);
    scenario::launch(np, scenario, &all)
}

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn rank_body() {
    let (scenario, out) = rank_scenario();
    let hvd = hvd::init().unwrap();
    let memory = hvd::device::memory(hvd.rank(), hvd.local_rank()).unwrap();
    let rank = hvd.rank();
    let tensor = |values: &[f32]| DeviceVec::from_slice(&memory, values).unwrap();
    let report = match scenario.as_str() {
        "ops" => {
            let averaged = hvd
                .allreduce("grad", tensor(&[rank as f32 + 1.0; 5]), ReduceOp::Average)
                .unwrap();
            let gathered = hvd
                .allgather("rows", tensor(&vec![rank as f32; 1 + rank]))
                .unwrap();
            let host = hvd.allreduce("host", vec![1i32], ReduceOp::Sum).unwrap();
            // Out of place: read from one device tensor, written to another.
            let zeros = DeviceVec::<f32>::zeros(&memory, &[3]).unwrap();
            let sum = Reduction::new(ReduceOp::Sum);
            let into = hvd
                .allreduce_into_async("into", tensor(&[rank as f32 + 1.0; 3]), zeros, sum)
                .and_then(|h| h.wait())
                .unwrap();
            format!(
                "{} {:?} {:?} {host:?} {:?}",
                hvd.transport(),
                averaged.to_vec().unwrap(),
                gathered.to_vec().unwrap(),
                into.to_vec().unwrap()
            )
        }
        "adasum" => {
            // Parallel vectors a and b = 2a: Adasum keeps 3/4 of b.
            let combined = hvd
                .adasum_async("grad", tensor(&[rank as f32 + 1.0; 4]))
                .and_then(|h| h.wait())
                .unwrap();
            format!("{:?}", combined.to_vec().unwrap())
        }
        "killed" => {
            hvd.allreduce("warmup", tensor(&[1.0]), ReduceOp::Sum)
                .unwrap();
            if rank == 1 {
                // SAFETY: raise(3) has no memory-safety preconditions.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            let err = loop {
                if let Err(e) = hvd.allreduce("grad", tensor(&[1.0; 1 << 16]), ReduceOp::Sum) {
                    break e;
                }
            };
            std::fs::write(report_path(&out, rank), err.to_string()).unwrap();
            // Fail, as a training script would: the launcher then gives its verdict.
            std::process::exit(1);
        }
        other => panic!("unknown scenario {other}"),
    };
    std::fs::write(report_path(&out, rank), report).unwrap();
}

/// Device tensors reduce (in place and out of place) and gather over `backend` (NCCL, or
/// staged through host memory over a host transport); host tensors go over the host
/// transport.
fn device_tensors_work_over(backend: &str, host: &str) {
    let (outcome, reports) = launch(3, "ops", &[("HVD_BACKEND", backend)]);
    assert_eq!(outcome, JobOutcome::Success, "{reports:?}");
    for report in reports {
        assert_eq!(
            report.as_deref(),
            Some(
                format!(
                    "{host} [2.0, 2.0, 2.0, 2.0, 2.0] [0.0, 1.0, 1.0, 2.0, 2.0, 2.0] [3] \
                     [6.0, 6.0, 6.0]"
                )
                .as_str()
            )
        );
    }
}

#[test]
fn device_tensors_go_over_nccl() {
    device_tensors_work_over("nccl", "shm");
}

#[test]
fn device_tensors_are_staged_through_host_memory_over_tcp() {
    device_tensors_work_over("tcp", "tcp");
}

#[test]
fn device_tensors_are_staged_through_host_memory_over_shm() {
    device_tensors_work_over("shm", "shm");
}

/// Adasum combines on the host: device tensors are copied down and back up, by NCCL's
/// memory or by host staging.
fn adasum_of_device_tensors_over(backend: &str) {
    let (outcome, reports) = launch(2, "adasum", &[("HVD_BACKEND", backend)]);
    assert_eq!(outcome, JobOutcome::Success, "{reports:?}");
    for report in reports {
        assert_eq!(report.as_deref(), Some("[1.5, 1.5, 1.5, 1.5]"));
    }
}

#[test]
fn adasum_of_device_tensors_in_an_nccl_job() {
    adasum_of_device_tensors_over("nccl");
}

#[test]
fn adasum_of_device_tensors_staged_through_host_memory() {
    adasum_of_device_tensors_over("shm");
}

#[test]
fn a_rank_killed_in_an_nccl_job_is_named_by_every_survivor_and_the_launcher() {
    let (outcome, reports) = launch(3, "killed", &[("HVD_BACKEND", "nccl")]);
    // Whoever sees it first, negotiation (host) or NCCL (device), names the dead rank.
    for rank in [0, 2] {
        let report = reports[rank].as_deref().expect("surviving ranks report");
        let expected = format!("rank {rank}: lost rank 1 during ");
        assert!(report.starts_with(&expected), "{report}");
    }
    match outcome {
        JobOutcome::Failed {
            rank,
            status,
            lost_by,
            ..
        } => {
            assert_eq!((rank, status.as_str()), (1, "killed by signal 9"));
            assert_eq!(lost_by, [0, 2]);
        }
        other => panic!("{other:?}"),
    }
}
