//! What happens when ranks do not keep up: stalls, joins, ranks that leave.

mod common;

use std::time::{Duration, Instant};

use common::{config, job, job_with_sets};
use hvd::core::reference::LocalGroup;
use hvd::{Collective, Config, ReduceOp};

#[test]
fn a_tensor_one_rank_never_submits_fails_after_the_stall_shutdown_time() {
    let cfg = Config {
        stall_check: Some(Duration::from_millis(100)),
        stall_shutdown: Some(Duration::from_millis(400)),
        ..config()
    };
    let started = Instant::now();
    // Keeps every rank in the job until all have their results: a rank that left would
    // fail the others' pending tensors for that reason instead.
    let all_done = std::sync::Barrier::new(3);
    let results = job(3, cfg, |hvd| {
        // Rank 1 never submits grad.w1; every rank submits "after", which must still work.
        let stalled = (hvd.rank() != 1).then(|| {
            hvd.allreduce_async("grad.w1", vec![1.0f32], ReduceOp::Sum)
                .unwrap()
        });
        let after = hvd.allreduce("after", vec![1u8], ReduceOp::Sum).unwrap();
        let outcome = stalled.map(|h| h.wait().unwrap_err().to_string());
        all_done.wait();
        (outcome, after)
    });
    assert!(started.elapsed() < Duration::from_secs(10));
    for (rank, (outcome, after)) in results.into_iter().enumerate() {
        assert_eq!(after, [3]);
        if let Some(message) = outcome {
            let expected_start =
                format!("rank {rank}: allreduce of tensor 'grad.w1' timed out after ");
            let expected_end =
                "waiting for rank(s) 1 to submit it (stall shutdown: HVD_STALL_SHUTDOWN_TIME)";
            assert!(
                message.starts_with(&expected_start) && message.ends_with(expected_end),
                "{message}"
            );
        }
    }
}

#[test]
fn join_works_whichever_rank_joins_first() {
    for first in 0..3 {
        let results = job(3, config(), |hvd| {
            let r = hvd.rank();
            // Rank `first` has no data at all; the others have 2 steps each, the highest
            // rank one more.
            let steps = if r == first {
                0
            } else {
                2 + usize::from(r == 2 && first != 2)
            };
            let mut averages = Vec::new();
            for step in 0..steps {
                averages.push(
                    hvd.allreduce(&format!("step{step}"), vec![3.0f32], ReduceOp::Average)
                        .unwrap()[0],
                );
            }
            (averages, hvd.join().unwrap())
        });
        let last = if first == 2 { 1 } else { 2 };
        for (rank, (averages, last_joined)) in results.into_iter().enumerate() {
            assert_eq!(last_joined, last, "first joiner {first}, rank {rank}");
            // Joined ranks contribute zeros; Average still divides by all 3 ranks.
            let expected: Vec<f32> = match (rank == first, rank == 2 && first != 2) {
                (true, _) => vec![],
                (false, false) => vec![2.0, 2.0],
                (false, true) => vec![2.0, 2.0, 1.0],
            };
            assert_eq!(averages, expected, "first joiner {first}, rank {rank}");
        }
    }
}

#[test]
fn broadcast_while_a_rank_has_joined_is_a_clear_error() {
    let results = job(2, config(), |hvd| {
        if hvd.rank() == 0 {
            let err = hvd.broadcast("w", vec![1u8], 0).unwrap_err().to_string();
            hvd.join().unwrap();
            err
        } else {
            hvd.join().unwrap();
            String::new()
        }
    });
    assert_eq!(
        results[0],
        "rank 0: broadcast of tensor 'w' cannot run while rank 1 has joined: only allreduce can run while ranks have joined"
    );
}

#[test]
fn process_sets_run_among_their_members_only() {
    let results = job_with_sets(4, config(), vec![vec![0, 2], vec![3, 1]], |hvd| {
        let evens = hvd.process_set(1).unwrap();
        let odds = hvd.process_set(2).unwrap();
        let (mine, other) = if hvd.rank() % 2 == 0 {
            (&evens, &odds)
        } else {
            (&odds, &evens)
        };
        let sum = mine
            .allreduce("x", vec![hvd.rank() as i32], ReduceOp::Sum)
            .unwrap();
        let set_rank = mine.topology().unwrap().rank();
        let refused = other
            .allreduce("x", vec![0i32], ReduceOp::Sum)
            .unwrap_err()
            .to_string();
        // A dynamic set, then removed.
        let all_but_0 = hvd.add_process_set(&[1, 2, 3]).unwrap();
        let dynamic = all_but_0
            .is_member()
            .then(|| all_but_0.allreduce("y", vec![1u8], ReduceOp::Sum).unwrap());
        hvd.remove_process_set(&all_but_0).unwrap();
        let after_removal = all_but_0.is_member().then(|| {
            all_but_0
                .allreduce("z", vec![1u8], ReduceOp::Sum)
                .unwrap_err()
                .to_string()
        });
        (
            sum,
            set_rank,
            refused,
            all_but_0.id(),
            dynamic,
            after_removal,
        )
    });
    assert_eq!(
        results[1].5.as_deref(),
        Some(
            "rank 1: invalid allreduce of tensor 'z': process set 3 (ranks [1, 2, 3]) was removed by remove_process_set"
        )
    );
    let sums: Vec<i32> = results.iter().map(|r| r.0[0]).collect();
    assert_eq!(sums, [2, 4, 2, 4]);
    let set_ranks: Vec<usize> = results.iter().map(|r| r.1).collect();
    assert_eq!(set_ranks, [0, 1, 1, 0]);
    assert_eq!(
        results[0].2,
        "rank 0: invalid allreduce of tensor 'x': rank 0 is not a member of process set 2 (ranks [3, 1])"
    );
    assert!(results.iter().all(|r| r.3 == 3));
    let dynamic: Vec<Option<Vec<u8>>> = results.iter().map(|r| r.4.clone()).collect();
    assert_eq!(dynamic, [None, Some(vec![3]), Some(vec![3]), Some(vec![3])]);
}

#[test]
fn a_rank_that_leaves_fails_the_others_with_its_rank_in_the_message() {
    let results = job(3, config(), |hvd| {
        if hvd.rank() == 2 {
            hvd.allreduce("warmup", vec![1u8], ReduceOp::Sum).unwrap();
            hvd.shutdown();
            return (String::new(), String::new());
        }
        hvd.allreduce("warmup", vec![1u8], ReduceOp::Sum).unwrap();
        let pending = hvd
            .allreduce("grad", vec![1u8], ReduceOp::Sum)
            .unwrap_err()
            .to_string();
        let later = hvd
            .allreduce("later", vec![1u8], ReduceOp::Sum)
            .unwrap_err()
            .to_string();
        (pending, later)
    });
    let expected =
        "hvd is shut down: rank 2 shut down (its hvd was dropped or shutdown() was called)";
    for (pending, later) in &results[..2] {
        assert_eq!(pending, expected);
        assert_eq!(later, expected);
    }
}

#[test]
fn process_sets_with_different_members_fail_at_once_on_every_rank() {
    for third in [vec![2, 0], vec![0, 1, 2]] {
        let started = Instant::now();
        let results = job(3, config(), |hvd| {
            let members = if hvd.rank() == 2 {
                third.clone()
            } else {
                vec![0, 2]
            };
            hvd.add_process_set(&members).unwrap_err().to_string()
        });
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let expected = format!(
            "Mismatched members in add_process_set: rank 0 has [0, 2], rank 2 has {third:?}"
        );
        assert_eq!(results, vec![expected; 3]);
    }
}

#[test]
fn control_operations_give_up_at_their_timeout_naming_the_set() {
    let release = std::sync::Barrier::new(3);
    let results = job(3, config(), |hvd| {
        let waited = Duration::from_millis(200);
        let outcome = if hvd.rank() == 2 {
            // Arrives late at everything: the others time out, then it completes them.
            release.wait();
            hvd.barrier().unwrap();
            hvd.add_process_set(&[0, 1]).unwrap();
            String::new()
        } else {
            let barrier = hvd.barrier_timeout(waited).unwrap_err().to_string();
            let added = hvd
                .add_process_set_timeout(&[0, 1], waited)
                .unwrap_err()
                .to_string();
            release.wait();
            format!("{barrier}\n{added}")
        };
        // Every rank joins: each then waits for the last one, which arrives after 200 ms.
        if hvd.rank() == 1 {
            std::thread::sleep(Duration::from_millis(500));
        }
        let joined = if hvd.rank() == 0 {
            hvd.join_timeout(Duration::from_millis(100))
                .unwrap_err()
                .to_string()
        } else {
            hvd.join().unwrap().to_string()
        };
        // Rank 0 stays until the others' joins complete: leaving would fail them.
        release.wait();
        (outcome, joined)
    });
    let (outcome, joined) = &results[0];
    assert_eq!(
        outcome,
        "rank 0: barrier of tensor 'hvd.barrier.0' timed out after 200ms waiting for every member of process set 0 (ranks [0, 1, 2]) to reach the barrier; it stays pending, and the stall warning (HVD_STALL_CHECK_TIME) names the ranks still missing\n\
         rank 0: add_process_set of tensor 'hvd.add_process_set.0' timed out after 200ms waiting for every member of process set 0 (ranks [0, 1, 2]) to call add_process_set; it stays pending, and the stall warning (HVD_STALL_CHECK_TIME) names the ranks still missing"
    );
    assert_eq!(
        joined,
        "rank 0: join of tensor 'hvd.join' timed out after 100ms waiting for every member of process set 0 (ranks [0, 1, 2]) to join; it stays pending, and the stall warning (HVD_STALL_CHECK_TIME) names the ranks still missing"
    );
    assert_eq!(results[1].1, "1");
}

#[test]
fn control_operations_that_do_not_meet_fail_at_the_stall_shutdown_time_and_leave_no_trace() {
    let cfg = Config {
        stall_check: Some(Duration::from_millis(100)),
        stall_shutdown: Some(Duration::from_millis(400)),
        ..config()
    };
    let started = Instant::now();
    // Both meet again only once both failures are in.
    let both_failed = std::sync::Barrier::new(2);
    let results = job_with_sets(2, cfg, vec![vec![0], vec![1]], |hvd| {
        let failed = if hvd.rank() == 0 {
            let set = hvd.process_set(2).unwrap();
            hvd.remove_process_set(&set).unwrap_err().to_string()
        } else {
            let barrier = hvd.barrier().unwrap_err().to_string();
            let addition = hvd.add_process_set(&[0, 1]).unwrap_err().to_string();
            format!("{barrier}\n{addition}")
        };
        both_failed.wait();
        // The failed barrier and addition are gone on every rank: the next ones meet.
        let later = hvd.barrier().and_then(|()| hvd.add_process_set(&[1]));
        (
            failed,
            later
                .map(|set| set.ranks().to_vec())
                .map_err(|e| e.to_string()),
        )
    });
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let waiting = |rank| {
        format!("waiting for rank(s) {rank} to submit it (stall shutdown: HVD_STALL_SHUTDOWN_TIME)")
    };
    let remove = &results[0].0;
    assert!(
        remove.starts_with(
            "rank 0: remove_process_set of tensor 'hvd.remove_process_set.2' timed out after "
        ) && remove.ends_with(&waiting(1)),
        "{remove}"
    );
    let (barrier, addition) = results[1].0.split_once('\n').unwrap();
    assert!(
        barrier.starts_with("rank 1: barrier of tensor 'hvd.barrier.0' timed out after ")
            && barrier.ends_with(&waiting(0)),
        "{barrier}"
    );
    assert!(
        addition.starts_with(
            "rank 1: add_process_set of tensor 'hvd.add_process_set.2' timed out after "
        ) && addition.ends_with(&waiting(0)),
        "{addition}"
    );
    for (_, later) in &results {
        assert_eq!(later, &Ok(vec![1]));
    }
}

#[test]
fn a_join_that_fails_at_the_stall_shutdown_time_leaves_no_rank_joined() {
    let cfg = Config {
        stall_check: Some(Duration::from_millis(100)),
        stall_shutdown: Some(Duration::from_millis(400)),
        ..config()
    };
    // Rank 1 waits for rank 0's join to have failed: only then do both meet again.
    let join_failed = std::sync::Barrier::new(2);
    let results = job(2, cfg, |hvd| {
        let failed_join = (hvd.rank() == 0).then(|| hvd.join().unwrap_err().to_string());
        join_failed.wait();
        let sum = hvd.allreduce("after", vec![1u8], ReduceOp::Sum);
        (failed_join, hvd.barrier().map_err(|e| e.to_string()), sum)
    });
    let message = results[0].0.clone().unwrap_or_default();
    assert!(
        message.starts_with("rank 0: join of tensor 'hvd.join' timed out after ")
            && message.ends_with(
                "waiting for rank(s) 1 to submit it (stall shutdown: HVD_STALL_SHUTDOWN_TIME)"
            ),
        "{message}"
    );
    for (_, barrier, sum) in results {
        assert_eq!(barrier, Ok(()));
        assert_eq!(sum.unwrap(), [2], "no rank contributes zeros as if joined");
    }
}

/// The reference transport, panicking on any allreduce of a tensor named `boom`: a bug
/// in a transport or middleware, which the engine must not turn into a hang.
struct PanicsOnBoom(hvd::core::reference::LocalCollective);

impl hvd::core::layer::Layer for PanicsOnBoom {
    type Inner = hvd::core::reference::LocalCollective;
    fn inner(&self) -> &Self::Inner {
        &self.0
    }
    fn call(&self, op: hvd::core::Operation<'_, '_>) -> hvd::Result<()> {
        if let hvd::core::Operation::Allreduce { tensors, .. } = &op
            && tensors.iter().any(|t| t.name() == "boom")
        {
            panic!("injected failure in the transport");
        }
        op.run(&self.0)
    }
    fn split(this: &Self, members: &[usize]) -> hvd::Result<Option<Box<dyn hvd::Collective>>> {
        this.0.split(members)
    }
}

#[test]
fn a_panic_in_the_background_thread_fails_the_running_call_and_every_later_one() {
    let group = LocalGroup::new(2).timeout(Duration::from_secs(30)).build();
    let errors: Vec<(String, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = group
            .into_iter()
            .map(|collective| {
                s.spawn(move || {
                    let hvd = hvd::Builder::new()
                        .collective(PanicsOnBoom(collective))
                        .config(common::config())
                        .build()
                        .unwrap();
                    hvd.allreduce("fine", vec![1.0f32], ReduceOp::Sum).unwrap();
                    let boom = hvd
                        .allreduce_async("boom", vec![1.0f32], ReduceOp::Sum)
                        .unwrap();
                    let err = boom.wait().unwrap_err().to_string();
                    let later = hvd
                        .allreduce("later", vec![1.0f32], ReduceOp::Sum)
                        .unwrap_err();
                    (err, later.to_string(), hvd.rank())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let (boom, later, _) = h.join().unwrap();
                (boom, later)
            })
            .collect()
    });
    // The call that was running when the thread failed is abandoned, and says so;
    // every later call names the rank and the failure.
    for (rank, (boom, later)) in errors.iter().enumerate() {
        assert_eq!(
            *boom,
            "hvd is shut down: the operation was abandoned: hvd's engine failed while it ran (the next call says why)"
        );
        assert_eq!(
            *later,
            format!(
                "hvd is shut down: rank {rank}: hvd's engine failed: injected failure in the transport"
            )
        );
    }
}
