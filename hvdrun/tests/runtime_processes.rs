//! The runtime across real processes over the default TCP transport: each test launches
//! ranks of this test binary with `Job`, and each rank writes what it saw to a file
//! that the test then checks.

#[path = "common/scenario.rs"]
mod scenario;

use std::time::{Duration, Instant};

use hvd::ReduceOp;
use hvdrun::JobOutcome;
use scenario::{launch as launch_with, rank_scenario, report_path};

/// Runs `rank_body` as `np` ranks with `scenario` over TCP with a 20 s timeout.
fn launch(np: usize, scenario: &str) -> (JobOutcome, Vec<Option<String>>) {
    launch_with(np, scenario, &[("HVD_TCP_TIMEOUT", "20")])
}

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn rank_body() {
    let (scenario, out) = rank_scenario();
    let hvd = hvd::init().unwrap();
    let rank = hvd.rank();
    let report = match scenario.as_str() {
        "basics" => {
            // Out-of-order submission, a mismatch, and the cache, across processes.
            let mut names = ["a", "b", "c"];
            if rank % 2 == 1 {
                names.reverse();
            }
            let handles: Vec<_> = names
                .iter()
                .map(|n| hvd.allreduce_async(n, vec![1i32], ReduceOp::Sum).unwrap())
                .collect();
            let sums: Vec<i32> = handles.into_iter().map(|h| h.wait().unwrap()[0]).collect();
            let mismatch = hvd
                .allreduce("grad.w1", vec![0u8; 1 + rank], ReduceOp::Sum)
                .unwrap_err();
            for _ in 0..10 {
                hvd.allreduce("cached", vec![1.0f32; 256], ReduceOp::Average)
                    .unwrap();
            }
            format!("{sums:?}\n{mismatch}\n{}", hvd.stats().cache_hits)
        }
        "compression" => {
            // 1 + 2^-10 is an f16 but not a bf16, 1 + 2^-12 neither; many tensors of
            // each, so that they are fused.
            let value = |i: usize| {
                1.0f32
                    + if i.is_multiple_of(2) {
                        1.0 / 1024.0
                    } else {
                        1.0 / 4096.0
                    }
            };
            let handles: Vec<_> = (0..20)
                .map(|i| {
                    hvd.allreduce_async(
                        &format!("grad.{i}"),
                        vec![value(i); 1000 + i],
                        ReduceOp::Sum,
                    )
                    .unwrap()
                })
                .collect();
            let sums: Vec<Vec<f32>> = handles.into_iter().map(|h| h.wait().unwrap()).collect();
            let (even, odd) = (sums[0][0], sums[1][0]);
            let same = sums
                .iter()
                .enumerate()
                .all(|(i, t)| t.iter().all(|s| *s == [even, odd][i % 2]));
            format!("{} {even} {odd} {same}", hvd.config().compression)
        }
        "die" => {
            hvd.allreduce("warmup", vec![1u8], ReduceOp::Sum).unwrap();
            if rank == 2 {
                // Gone without a word: no shutdown, no error exit the launcher would act on.
                std::process::exit(0);
            }
            let started = Instant::now();
            let err = hvd
                .allreduce("grad", vec![1.0f32; 1 << 20], ReduceOp::Sum)
                .unwrap_err();
            format!("{err}\n{}", started.elapsed().as_millis())
        }
        "freeze" => {
            hvd.allreduce("warmup", vec![1u8], ReduceOp::Sum).unwrap();
            if rank == 2 {
                // Frozen, as by SIGSTOP from a debugger or a stuck device: alive, silent.
                // SAFETY: raise(3) has no memory-safety preconditions.
                unsafe { libc::raise(libc::SIGSTOP) };
            }
            let started = Instant::now();
            let err = loop {
                if let Err(e) = hvd.allreduce("grad", vec![1.0f32; 1 << 16], ReduceOp::Sum) {
                    break e;
                }
            };
            std::fs::write(
                report_path(&out, rank),
                format!("{err}\n{}", started.elapsed().as_millis()),
            )
            .unwrap();
            // Fail, as a training script would: the launcher then gives its verdict.
            std::process::exit(1);
        }
        other => panic!("unknown scenario {other}"),
    };
    std::fs::write(report_path(&out, rank), report).unwrap();
}

#[test]
fn negotiation_and_the_cache_work_across_processes() {
    let (outcome, reports) = launch(3, "basics");
    assert_eq!(outcome, JobOutcome::Success);
    for report in reports {
        let report = report.expect("every rank reports");
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines[0], "[3, 3, 3]");
        assert!(
            lines[1].starts_with(
                "Mismatched shapes for tensor 'grad.w1': rank 0 has [1], rank 1 has [2]"
            ),
            "{report}"
        );
        assert_eq!(lines[2], "9");
    }
}

#[test]
fn hvd_compression_sends_gradients_as_sixteen_bit_floats() {
    // Four ranks sum 1 + 2^-10 (exact in f32 and f16, 4 in bf16) and 1 + 2^-12 (exact
    // only in f32).
    for (compression, sum) in [
        ("none", "4.0039063 4.0009766"),
        ("fp16", "4.0039063 4"),
        ("bf16", "4 4"),
    ] {
        let (outcome, reports) = launch_with(
            4,
            "compression",
            &[("HVD_TCP_TIMEOUT", "20"), ("HVD_COMPRESSION", compression)],
        );
        assert_eq!(outcome, JobOutcome::Success, "{compression}");
        for report in reports {
            assert_eq!(
                report.as_deref(),
                Some(format!("{compression} {sum} true").as_str())
            );
        }
    }
}

#[test]
fn a_rank_that_dies_fails_the_others_quickly_naming_it() {
    let (_, reports) = launch(3, "die");
    for report in &reports[..2] {
        let report = report.as_ref().expect("surviving ranks report");
        let (message, millis) = report.split_once('\n').unwrap();
        assert!(message.contains("rank 2"), "{message}");
        assert!(
            millis.parse::<u64>().unwrap() < Duration::from_secs(10).as_millis() as u64,
            "{report}"
        );
    }
    assert!(reports[2].is_none());
}

/// Rank 2 freezes; checks what the survivors and the launcher say, with `vars` setting
/// a 2 s timeout, and that the survivors fail within `within` of their last call.
fn frozen_rank_is_named(vars: &[(&str, &str)], within: Duration) {
    for trial in 0..2 {
        let (outcome, reports) = launch_with(3, "freeze", vars);
        for (rank, report) in reports[..2].iter().enumerate() {
            let report = report.as_ref().expect("surviving ranks report");
            let (message, millis) = report.split_once('\n').unwrap();
            let direct =
                format!("rank {rank}: negotiation timed out after 2s waiting for rank 2 (");
            let reported =
                format!("rank {rank}: lost rank 2 during negotiation: reported by rank ");
            assert!(
                message.starts_with(&direct) || message.starts_with(&reported),
                "trial {trial}: {message}"
            );
            assert!(
                message.contains("; this rank's waiting tensors: 'grad'"),
                "trial {trial}: {message}"
            );
            assert!(
                u128::from(millis.parse::<u64>().unwrap()) < within.as_millis(),
                "trial {trial}: {report}"
            );
        }
        match outcome {
            JobOutcome::Failed {
                rank,
                status,
                lost_by,
                ..
            } => {
                assert_eq!(rank, 2, "trial {trial}");
                assert_eq!(
                    status,
                    "still running when its peers lost it: frozen, stopped, stuck or cut off from them?",
                    "trial {trial}"
                );
                assert_eq!(lost_by, [0, 1], "trial {trial}");
            }
            other => panic!("trial {trial}: {other:?}"),
        }
    }
}

#[test]
fn a_frozen_rank_is_named_by_every_survivor_and_the_launcher_over_tcp() {
    let vars = [("HVD_BACKEND", "tcp"), ("HVD_TCP_TIMEOUT", "2")];
    frozen_rank_is_named(&vars, Duration::from_secs(8));
}

#[test]
fn a_frozen_rank_is_named_by_every_survivor_and_the_launcher_over_shm() {
    let vars = [("HVD_BACKEND", "shm"), ("HVD_SHM_TIMEOUT", "2")];
    frozen_rank_is_named(&vars, Duration::from_secs(8));
}

/// The job-wide timeout governs the default transport (shared memory on one host):
/// the frozen rank is named within it and a second.
#[test]
fn a_frozen_rank_is_named_within_the_job_timeout_over_the_default_transport() {
    frozen_rank_is_named(&[("HVD_TIMEOUT", "2")], Duration::from_secs(3));
}
