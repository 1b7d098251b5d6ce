//! The runtime over MPI: ranks of an `mpirun` job pick the MPI transport by themselves
//! (no `HVD_BACKEND`, no `HVD_STORE_DIR`) and negotiate, fuse and run process sets over it.
#![cfg(feature = "mpi")]

#[path = "../../hvd-mpi/tests/mpirun/mod.rs"]
mod mpirun;

use std::time::Duration;

use hvd::ReduceOp;

/// Out-of-order submission, a fused burst, and a process set, as one rank.
fn runtime_rank() {
    let hvd = hvd::init().unwrap();
    let (rank, size) = (hvd.rank(), hvd.size());
    // Negotiation: odd ranks submit in the reverse order.
    let mut names = ["a", "b", "c", "d", "e"];
    if rank % 2 == 1 {
        names.reverse();
    }
    let handles: Vec<_> = names
        .iter()
        .map(|n| {
            hvd.allreduce_async(n, vec![rank as i32 + 1; 3], ReduceOp::Sum)
                .unwrap()
        })
        .collect();
    let sums: Vec<i32> = handles.into_iter().map(|h| h.wait().unwrap()[0]).collect();
    // Fusion: a burst of small tensors, averaged.
    let burst: Vec<_> = (0..64)
        .map(|i| {
            let name = format!("grad.{i}");
            hvd.allreduce_async(&name, vec![(rank * 64 + i) as f32; 256], ReduceOp::Average)
                .unwrap()
        })
        .collect();
    let fused_ok = burst.into_iter().enumerate().all(|(i, h)| {
        let expected = (0..size).map(|r| (r * 64 + i) as f32).sum::<f32>() / size as f32;
        h.wait().unwrap().iter().all(|v| *v == expected)
    });
    // A process set of ranks 2 and 0 (in that order), on its own communicator and thread.
    let set = hvd.add_process_set(&[2, 0]).unwrap();
    let in_set = if set.is_member() {
        set.allreduce("set.x", vec![rank as i64], ReduceOp::Sum)
            .unwrap()[0]
    } else {
        -1
    };
    hvd.barrier().unwrap();
    println!("RANK {rank} of {size}: sums {sums:?} fused {fused_ok} set {in_set}");
}

#[test]
fn negotiation_fusion_and_process_sets_run_over_mpi_under_mpirun() {
    if mpirun::rank_body() {
        return runtime_rank();
    }
    let dir = tempfile::tempdir().unwrap();
    let timeline = dir.path().join("timeline.json");
    let job = mpirun::job(
        "negotiation_fusion_and_process_sets_run_over_mpi_under_mpirun",
        3,
        &[("HVD_TIMELINE", timeline.to_str().unwrap())],
        Duration::from_secs(120),
    );
    assert!(
        job.status.is_some_and(|s| s.success()),
        "{:?} after {:?}:\n{}",
        job.status,
        job.took,
        job.output
    );
    for (rank, set) in [(0, 2), (1, -1), (2, 2)] {
        let line = format!("RANK {rank} of 3: sums [6, 6, 6, 6, 6] fused true set {set}");
        assert!(
            job.output.contains(&line),
            "no '{line}' in:\n{}",
            job.output
        );
    }
    // The timeline shows the burst packed into the fusion buffer and MPI moving it.
    let trace = std::fs::read_to_string(&timeline).unwrap();
    assert!(trace.contains("MEMCPY_IN_FUSION_BUFFER"), "{trace}");
    assert!(trace.contains("MPI_ALLREDUCE"), "{trace}");
}

#[test]
fn ranks_that_mpi_does_not_know_are_refused_with_both_views() {
    if std::env::var_os("HVD_MPI_TEST_SINGLETON").is_some() {
        let err = hvd::init().unwrap_err();
        println!("ERROR {err}");
        return;
    }
    // Started by another launcher as rank 1 of 2, MPI sees a job of one.
    let exe = std::env::current_exe().unwrap();
    // Under coreutils' timeout: an MPI start-up that stalls fails the test, not the suite.
    let output = std::process::Command::new("timeout")
        .arg("60")
        .arg(exe)
        .args([
            "ranks_that_mpi_does_not_know_are_refused_with_both_views",
            "--exact",
            "--nocapture",
        ])
        .env("HVD_MPI_TEST_SINGLETON", "1")
        .env("HVD_RANK", "1")
        .env("HVD_SIZE", "2")
        .env("HVD_BACKEND", "mpi")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("ERROR invalid value \"rank 1 of 2\" for the job's rank and size (from hvdrun): expected MPI's own, rank 0 of 1: start MPI jobs with mpirun (or srun), or choose another transport with HVD_BACKEND"),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
