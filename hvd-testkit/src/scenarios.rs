//! Failures every transport must report alike. Each scenario runs the failure and hands
//! back what every survivor said; the transport's test asserts its own wording.

use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{Collective, ReduceOp, Reduction, Result, TensorMut};

use crate::processes::{ChildRank, child_group, launch, wait, wait_for_output};

/// What a survivor said: its first error, and how long the failing call took.
#[derive(Debug, Clone)]
pub struct Survivor {
    pub rank: usize,
    pub error: String,
    pub took: Duration,
}

/// A 16 MiB allreduce of `big`: long enough that a peer's failure lands mid-call.
fn allreduce_big(group: &dyn Collective, big: &mut [f32]) -> Result<()> {
    group.allreduce(
        &mut [TensorMut::from_slice("big", big)],
        Reduction::new(ReduceOp::Sum),
    )
}

/// Rank `leaver` of `groups` (one per rank of a group in this process) drops its group
/// instead of joining an allreduce; every other rank allreduces. Requires every later
/// call of a survivor to fail at once with its first error, and returns the survivors.
pub fn leave_mid_call<C: Collective + 'static>(groups: Vec<C>, leaver: usize) -> Vec<Survivor> {
    let handles: Vec<_> = groups
        .into_iter()
        .enumerate()
        .map(|(rank, group)| {
            thread::spawn(move || {
                if rank == leaver {
                    drop(group);
                    return None;
                }
                let mut big = vec![1.0f32; 4 << 20];
                let started = Instant::now();
                let first = allreduce_big(&group, &mut big);
                let took = started.elapsed();
                let again = allreduce_big(&group, &mut big);
                Some((rank, first, again, took))
            })
        })
        .collect();
    let mut survivors = Vec::new();
    for handle in handles {
        let Some((rank, first, again, took)) = handle.join().expect("a rank panicked") else {
            continue;
        };
        let error = first
            .expect_err("the call succeeded without the rank that left")
            .to_string();
        let again = again.map_or_else(|e| e.to_string(), |()| "succeeded".into());
        assert_eq!(
            again, error,
            "rank {rank}: later calls fail with the same error"
        );
        survivors.push(Survivor { rank, error, took });
    }
    survivors
}

/// What the survivors of a killed rank said.
#[derive(Debug)]
pub struct Killed {
    /// Each survivor's rank and first error.
    pub errors: Vec<(usize, String)>,
    /// From the kill until every survivor had exited.
    pub noticed_within: Duration,
}

/// Ranks of `test` loop over a 16 MiB allreduce; once every rank has done two rounds,
/// rank `victim` is killed with SIGKILL, without a chance to say goodbye. In the test:
/// returns what each survivor printed, having required each to fail, to fail again with
/// the same error, and to exit 0. In a rank: runs the loop on the group `connect` makes.
pub fn kill_mid_call<C: Collective>(
    test: &str,
    size: usize,
    victim: usize,
    env: &[(&str, &str)],
    connect: impl FnOnce(&ChildRank) -> Result<C>,
) -> Option<Killed> {
    if let Some(group) = child_group(connect) {
        let mut big = vec![1.0f32; 4 << 20];
        for round in 1.. {
            if let Err(e) = allreduce_big(&group, &mut big) {
                println!("ERROR: {e}");
                break;
            }
            println!("round {round}");
        }
        let again = allreduce_big(&group, &mut big);
        println!(
            "AGAIN: {}",
            again.map_or_else(|e| e.to_string(), |()| "succeeded".into())
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut ranks = launch(test, size, dir.path(), env);
    wait_for_output(&ranks, "round 2", Duration::from_secs(60));
    ranks[victim]
        .process
        .kill()
        .unwrap_or_else(|e| panic!("cannot kill rank {victim}: {e}"));
    let killed = Instant::now();
    wait(&mut ranks, killed + Duration::from_secs(30));
    let noticed_within = killed.elapsed();
    let errors = (0..size)
        .filter(|rank| *rank != victim)
        .map(|rank| {
            let output = ranks[rank].output();
            let error = output
                .lines()
                .find_map(|l| l.strip_prefix("ERROR: "))
                .unwrap_or_else(|| panic!("rank {rank} reported no error:\n{output}"))
                .to_owned();
            assert!(
                output.contains(&format!("AGAIN: {error}")),
                "rank {rank} did not fail again with the same error:\n{output}"
            );
            assert!(ranks[rank].succeeded(), "rank {rank}:\n{output}");
            (rank, error)
        })
        .collect();
    Some(Killed {
        errors,
        noticed_within,
    })
}
