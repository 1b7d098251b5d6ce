//! Failures injected into the GPU test double, with ranks as processes: every rank's
//! error text, the rank to blame named by every survivor, and every later call failing
//! the same way. Each child prints `ERROR: <first error>` and `AGAIN: <next call's>`.

mod common;

use std::time::{Duration, Instant};

use hvd_core::{Collective, DType, DeviceBlock, ReduceOp, Reduction, TensorMut};
use hvd_gpu_double::FAULTS_VAR;

/// In a child: allreduces a `bytes`-byte tensor named `grad` until one fails, printing
/// each round, then the error and what the next call says.
fn allreduce_until_failure(connected: common::Connected, bytes: usize) {
    let (group, memory) = match connected {
        Ok(connected) => connected,
        Err(e) => {
            println!("ERROR: {e}");
            return;
        }
    };
    let block = DeviceBlock::with_contents(&memory, &vec![1u8; bytes]).unwrap();
    let call = || {
        let view =
            TensorMut::from_device("grad", DType::F32, vec![bytes / 4], block.buffer()).unwrap();
        group.allreduce(&mut [view], Reduction::new(ReduceOp::Sum))
    };
    for round in 1.. {
        if let Err(e) = call() {
            println!("ERROR: {e}");
            break;
        }
        println!("round {round}");
    }
    println!(
        "AGAIN: {}",
        call().map_or_else(|e| e.to_string(), |()| "succeeded".into())
    );
}

/// Runs `test` on `size` ranks with `env` and returns each rank's `ERROR:` line,
/// checking that the next call repeated it and that every rank exited cleanly.
fn errors(test: &str, size: usize, env: &[(Option<usize>, &str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut ranks = common::launch(test, size, dir.path(), env);
    common::wait(&mut ranks, Instant::now() + Duration::from_secs(120));
    ranks
        .iter()
        .enumerate()
        .map(|(rank, r)| {
            let output = r.output();
            let error = r
                .line("ERROR: ")
                .unwrap_or_else(|| panic!("rank {rank} reported no error:\n{output}"));
            if let Some(again) = r.line("AGAIN: ") {
                assert_eq!(
                    again, error,
                    "rank {rank}: the next call says something else"
                );
            }
            assert!(
                r.exit.is_some_and(|s| s.success()),
                "rank {rank}:\n{output}"
            );
            error
        })
        .collect()
}

#[test]
fn a_failed_ncclgroupend_is_named_by_every_rank() {
    const TEST: &str = "a_failed_ncclgroupend_is_named_by_every_rank";
    if let Some((_, _, connected)) = common::child() {
        return allreduce_until_failure(connected, 64);
    }
    let fault = [(Some(1), FAULTS_VAR, "fail:call=ncclGroupEnd,nth=3")];
    let errors = errors(TEST, 2, &fault);
    let nccl = "unhandled system error (run with NCCL_DEBUG=INFO for details) (NCCL error 2): \
                injected fault: ncclGroupEnd failed";
    assert_eq!(
        errors[1],
        format!("rank 1: allreduce of tensor 'grad' failed on the device: {nccl}")
    );
    assert_eq!(
        errors[0],
        format!("rank 0: lost rank 1 during allreduce of tensor 'grad': it failed: {nccl}")
    );
}

#[test]
fn an_asynchronous_remote_error_is_named_by_every_rank() {
    const TEST: &str = "an_asynchronous_remote_error_is_named_by_every_rank";
    if let Some((_, _, connected)) = common::child() {
        return allreduce_until_failure(connected, 64);
    }
    let fault = [(Some(2), FAULTS_VAR, "remote-error:nth=4")];
    let errors = errors(TEST, 3, &fault);
    let nccl = "remote process exited or there was a network error (NCCL error 6): injected \
                fault: remote process exited or there was a network error";
    assert_eq!(
        errors[2],
        format!("rank 2: allreduce of tensor 'grad' failed on the device: {nccl}")
    );
    for rank in [0, 1] {
        assert_eq!(
            errors[rank],
            format!(
                "rank {rank}: lost rank 2 during allreduce of tensor 'grad': it failed: {nccl}"
            )
        );
    }
}

#[test]
fn a_device_hang_times_out_on_every_rank() {
    const TEST: &str = "a_device_hang_times_out_on_every_rank";
    if let Some((_, _, connected)) = common::child() {
        return allreduce_until_failure(connected, 64);
    }
    let env = [
        (Some(0), FAULTS_VAR, "hang:nth=2"),
        (None, "HVD_NCCL_TIMEOUT", "3"),
    ];
    for (rank, error) in errors(TEST, 2, &env).into_iter().enumerate() {
        assert_eq!(
            error,
            format!(
                "rank {rank}: allreduce of tensor 'grad' timed out after 3s waiting for NCCL to \
                 finish it: all 2 ranks timed out in this call (the device work never finished)"
            )
        );
    }
}

#[test]
fn running_out_of_device_memory_names_the_allocation() {
    const TEST: &str = "running_out_of_device_memory_names_the_allocation";
    if let Some((rank, _, connected)) = common::child() {
        let (_group, memory) = connected.unwrap();
        let error = DeviceBlock::alloc(&memory, 1 << 20).unwrap_err();
        println!("ERROR: {error}");
        assert_eq!(rank, 0);
        return;
    }
    // The first allocation is the transport's own (its barrier's four bytes).
    let errors = errors(TEST, 1, &[(None, FAULTS_VAR, "oom:nth=2")]);
    assert_eq!(
        errors[0],
        "rank 0: cuMemAlloc of 1048576 bytes on cuda:0: out of memory (CUDA_ERROR_OUT_OF_MEMORY)"
    );
}

#[test]
fn an_nccl_too_old_is_refused_naming_its_version() {
    const TEST: &str = "an_nccl_too_old_is_refused_naming_its_version";
    if let Some((_, _, connected)) = common::child() {
        return allreduce_until_failure(connected, 64);
    }
    let errors = errors(TEST, 1, &[(None, FAULTS_VAR, "version:code=21203")]);
    let double = common::double();
    assert!(
        errors[0].starts_with(&format!(
            "NCCL 2.18.0 or newer ({double}) is not available: the loaded library is NCCL \
             2.12.3, which lacks ncclCommSplit; install NCCL"
        )),
        "{}",
        errors[0]
    );
}

#[test]
fn a_rank_that_never_starts_is_named_at_connect() {
    const TEST: &str = "a_rank_that_never_starts_is_named_at_connect";
    if let Some((_, _, connected)) = common::child() {
        return allreduce_until_failure(connected, 64);
    }
    let dir = tempfile::tempdir().unwrap();
    let env = [(None, "HVD_START_TIMEOUT", "2")];
    let env = common::with_double(&env);
    let mut ranks = hvd_testkit::processes::launch_ranks(TEST, 3, &[0, 1], dir.path(), &env);
    common::wait(&mut ranks, Instant::now() + Duration::from_secs(60));
    for (rank, r) in ranks.iter().enumerate() {
        assert_eq!(
            r.line("ERROR: ").as_deref(),
            Some(format!(
                "rank {rank}: connect of tensor 'NCCL communicator' timed out after 2s waiting \
                 for rank 2 to join the NCCL communicator (not started, crashed, or given \
                 another store?)"
            ))
            .as_deref(),
            "{}",
            r.output()
        );
    }
}

#[test]
fn a_killed_rank_is_named_by_every_survivor() {
    const TEST: &str = "a_killed_rank_is_named_by_every_survivor";
    if let Some((_, _, connected)) = common::child() {
        return allreduce_until_failure(connected, 4 << 20);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ranks = common::launch(TEST, 4, dir.path(), &[]);
    common::await_line(&ranks, "round 2");
    let pid = ranks[2].process.id();
    ranks[2].process.kill().unwrap();
    let killed = Instant::now();
    common::wait(&mut ranks, killed + Duration::from_secs(30));
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "the survivors took {:?}",
        killed.elapsed()
    );
    for rank in [0, 1, 3] {
        let r = &ranks[rank];
        assert_eq!(
            r.line("ERROR: ").as_deref(),
            Some(format!(
                "rank {rank}: lost rank 2 during allreduce of tensor 'grad': its process (pid {pid}) exited"
            ))
            .as_deref(),
            "{}",
            r.output()
        );
        assert_eq!(r.line("AGAIN: "), r.line("ERROR: "));
    }
}

#[test]
fn a_frozen_rank_is_named_silent_by_every_survivor() {
    const TEST: &str = "a_frozen_rank_is_named_silent_by_every_survivor";
    if let Some((_, _, connected)) = common::child() {
        return allreduce_until_failure(connected, 64);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ranks = common::launch(TEST, 3, dir.path(), &[(None, "HVD_NCCL_TIMEOUT", "3")]);
    common::await_line(&ranks, "round 2");
    let frozen = ranks[1].process.id() as libc::pid_t;
    // SAFETY: stops a child of this test, which it kills below.
    unsafe { libc::kill(frozen, libc::SIGSTOP) };
    let deadline = Instant::now() + Duration::from_secs(60);
    let survivors_done = |ranks: &[common::Rank]| {
        [0, 2]
            .iter()
            .all(|r| ranks[*r].output().contains("AGAIN: "))
    };
    while !survivors_done(&ranks) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    ranks[1].process.kill().unwrap();
    common::wait(&mut ranks, Instant::now() + Duration::from_secs(30));
    for rank in [0, 2] {
        let r = &ranks[rank];
        assert_eq!(
            r.line("ERROR: ").as_deref(),
            Some(format!(
                "rank {rank}: allreduce of tensor 'grad' timed out after 3s waiting for rank 1 \
                 (it never reported how the call went)"
            ))
            .as_deref(),
            "{}",
            r.output()
        );
    }
}

#[test]
fn ranks_that_disagree_on_a_call_are_told_what_each_called() {
    let errors = common::threads(2, |group, memory| {
        let count = if group.topology().rank() == 0 { 4 } else { 5 };
        let block = DeviceBlock::alloc(&memory, 20).unwrap();
        let view = TensorMut::from_device(
            "grad",
            DType::F32,
            vec![count],
            block.buffer().slice(0, count * 4).unwrap(),
        )
        .unwrap();
        group
            .allreduce(&mut [view], Reduction::new(ReduceOp::Sum))
            .unwrap_err()
            .to_string()
    });
    for error in errors {
        assert!(
            error.contains(
                "invalid usage (run with NCCL_DEBUG=WARN for details) (NCCL error 5): ranks \
                 disagree on call 1: rank 0 called ncclAllReduce(count 4, float32, sum), rank 1 \
                 called ncclAllReduce(count 5, float32, sum)"
            ),
            "{error}"
        );
    }
}
