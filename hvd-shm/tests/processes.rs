//! Ranks as processes. Each test runs this test binary once per rank (`--exact <test>`),
//! with the rank, size and a shared store directory in the environment; the ranks meet
//! through a `FileStore` there. Children that outlive their deadline are killed.

mod common;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::conformance::{Options, run_rank};
use hvd_core::store::FileStore;
use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
use hvd_shm::{ShmCollective, ShmConfig};

const RANK: &str = "HVD_SHM_TEST_RANK";
const SIZE: &str = "HVD_SHM_TEST_SIZE";
const STORE: &str = "HVD_SHM_TEST_STORE";

/// In a child: its rank's member of the group.
fn child_group() -> Option<ShmCollective> {
    let rank: usize = std::env::var(RANK).ok()?.parse().ok()?;
    let size: usize = std::env::var(SIZE).ok()?.parse().ok()?;
    let store = FileStore::new(std::env::var(STORE).ok()?).unwrap();
    let config = ShmConfig::from_env().unwrap();
    Some(ShmCollective::connect(Arc::new(store), rank, size, config).unwrap())
}

/// One child process and the file its output goes to.
struct Rank {
    process: Child,
    output: PathBuf,
    exit: Option<ExitStatus>,
}

impl Rank {
    fn output(&self) -> String {
        fs::read_to_string(&self.output).unwrap_or_default()
    }
}

/// Starts `size` ranks running `test` of this binary, as job `test`.
fn launch(test: &str, size: usize, dir: &Path) -> Vec<Rank> {
    (0..size)
        .map(|rank| {
            let output = dir.join(format!("rank{rank}.out"));
            let file = File::create(&output).unwrap();
            let process = Command::new(std::env::current_exe().unwrap())
                .args([test, "--exact", "--nocapture", "--test-threads=1"])
                .env(RANK, rank.to_string())
                .env(SIZE, size.to_string())
                .env(STORE, dir.join("store"))
                .env("HVD_JOB_ID", test.replace('_', "-"))
                .env("HVD_START_TIMEOUT", "30")
                .stdout(file.try_clone().unwrap())
                .stderr(file)
                .spawn()
                .unwrap();
            Rank {
                process,
                output,
                exit: None,
            }
        })
        .collect()
}

/// Waits for every rank to exit; kills the ones still running at `deadline`.
fn wait(ranks: &mut [Rank], deadline: Instant) {
    loop {
        for rank in ranks.iter_mut().filter(|r| r.exit.is_none()) {
            rank.exit = rank.process.try_wait().unwrap();
        }
        if ranks.iter().all(|r| r.exit.is_some()) {
            return;
        }
        if Instant::now() >= deadline {
            for rank in ranks.iter_mut().filter(|r| r.exit.is_none()) {
                let _ = rank.process.kill();
                rank.exit = rank.process.wait().ok();
            }
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn conformance_in_processes(test: &str, size: usize, options: Options) {
    if let Some(group) = child_group() {
        match run_rank(&group, &options) {
            Ok(report) => println!("PASSED {} checks", report.passed.len()),
            Err(failure) => panic!("FAILED {failure}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ranks = launch(test, size, dir.path());
    wait(&mut ranks, Instant::now() + Duration::from_secs(120));
    for (rank, r) in ranks.iter().enumerate() {
        let output = r.output();
        assert!(
            r.exit.is_some_and(|s| s.success()) && output.contains("PASSED"),
            "rank {rank} of {size} ({:?}):\n{output}",
            r.exit
        );
    }
    common::assert_no_leftovers(&test.replace('_', "-"));
}

#[test]
fn conformance_in_two_processes() {
    conformance_in_processes("conformance_in_two_processes", 2, Options::default());
}

#[test]
fn conformance_in_three_processes() {
    conformance_in_processes("conformance_in_three_processes", 3, Options::quick());
}

#[test]
fn conformance_in_four_processes() {
    conformance_in_processes("conformance_in_four_processes", 4, Options::quick());
}

#[test]
fn a_killed_rank_is_named_by_every_survivor() {
    const TEST: &str = "a_killed_rank_is_named_by_every_survivor";
    if let Some(group) = child_group() {
        let mut big = vec![1.0f32; 4 << 20];
        let mut call = || {
            group.allreduce(
                &mut [TensorMut::from_slice("big", &mut big)],
                Reduction::new(ReduceOp::Sum),
            )
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
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ranks = launch(TEST, 4, dir.path());
    let started = Instant::now();
    while !ranks.iter().all(|r| r.output().contains("round 2")) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the ranks never got going"
        );
        thread::sleep(Duration::from_millis(10));
    }
    ranks[2].process.kill().unwrap();
    let killed = Instant::now();
    wait(&mut ranks, killed + Duration::from_secs(20));
    let took = killed.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the survivors took {took:?} to notice"
    );
    for rank in [0, 1, 3] {
        let output = ranks[rank].output();
        let error = output
            .lines()
            .find_map(|l| l.strip_prefix("ERROR: "))
            .unwrap_or_else(|| panic!("rank {rank} reported no error:\n{output}"));
        let direct =
            format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': its process (pid ");
        let reported =
            format!("rank {rank}: lost rank 2 during allreduce of tensor 'big': reported by rank ");
        assert!(
            (error.starts_with(&direct) && error.ends_with(") exited"))
                || (error.starts_with(&reported) && error.ends_with(": its process exited")),
            "rank {rank}: {error}"
        );
        assert!(
            output.contains(&format!("AGAIN: {error}")),
            "rank {rank}:\n{output}"
        );
        assert!(
            ranks[rank].exit.is_some_and(|s| s.success()),
            "rank {rank}:\n{output}"
        );
    }
    common::assert_no_leftovers(&TEST.replace('_', "-"));
}
