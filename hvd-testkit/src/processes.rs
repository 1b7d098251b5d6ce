//! Ranks as processes. A test launches its own binary once per rank (`<test> --exact`),
//! with the rank, the size and a shared store directory in the environment; the ranks
//! meet through a `FileStore` there. Children that outlive their deadline are killed.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::store::FileStore;
use hvd_core::{Result, Store};

const RANK: &str = "HVD_TESTKIT_RANK";
const SIZE: &str = "HVD_TESTKIT_SIZE";
const STORE: &str = "HVD_TESTKIT_STORE";

/// In a child: which rank it is, of how many, and the store the ranks meet in.
pub struct ChildRank {
    pub rank: usize,
    pub size: usize,
    pub store: Arc<dyn Store>,
}

impl std::fmt::Debug for ChildRank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildRank")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// The rank this process is, when [`launch`] started it; `None` in the test itself.
pub fn child() -> Option<ChildRank> {
    let rank: usize = std::env::var(RANK).ok()?.parse().ok()?;
    let size: usize = std::env::var(SIZE).ok()?.parse().ok()?;
    let dir = std::env::var(STORE).ok()?;
    let store = FileStore::new(&dir).unwrap_or_else(|e| panic!("rank {rank}: store in {dir}: {e}"));
    Some(ChildRank {
        rank,
        size,
        store: Arc::new(store),
    })
}

/// In a child, its member of the group `connect` makes; `None` in the test itself. A
/// failure to connect ends the child with a message naming its rank.
pub fn child_group<C>(connect: impl FnOnce(&ChildRank) -> Result<C>) -> Option<C> {
    let child = child()?;
    Some(connect(&child).unwrap_or_else(|e| panic!("rank {}: {e}", child.rank)))
}

/// One child process and the file its output goes to.
#[derive(Debug)]
pub struct Rank {
    pub process: Child,
    output: PathBuf,
    /// How it exited, once [`wait`] has seen it.
    pub exit: Option<ExitStatus>,
}

impl Rank {
    /// Everything it printed so far, stdout and stderr interleaved.
    pub fn output(&self) -> String {
        fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// Whether it exited with status 0.
    pub fn succeeded(&self) -> bool {
        self.exit.is_some_and(|s| s.success())
    }

    /// The rest of the first line after `marker` (the test harness may print its own
    /// words before it on the same line).
    pub fn line(&self, marker: &str) -> Option<String> {
        self.output()
            .lines()
            .find_map(|l| l.find(marker).map(|at| l[at + marker.len()..].to_owned()))
    }
}

/// A variable for the children: `(rank, name, value)`, for that rank only or, with
/// `None`, for every rank.
pub type RankEnv<'a> = (Option<usize>, &'a str, &'a str);

/// Starts `size` ranks running `test` of this test binary, meeting in a store under
/// `dir`, with `env` set for each (after the defaults, so it can override them).
pub fn launch(test: &str, size: usize, dir: &Path, env: &[(&str, &str)]) -> Vec<Rank> {
    let every: Vec<RankEnv<'_>> = env
        .iter()
        .map(|&(name, value)| (None, name, value))
        .collect();
    launch_ranks(test, size, &(0..size).collect::<Vec<_>>(), dir, &every)
}

/// Like [`launch`], but only the ranks in `ranks` of a group of `size` (the others are
/// missing, or started later), each with the variables of `env` meant for it.
pub fn launch_ranks(
    test: &str,
    size: usize,
    ranks: &[usize],
    dir: &Path,
    env: &[RankEnv<'_>],
) -> Vec<Rank> {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test binary: {e}"));
    ranks
        .iter()
        .map(|&rank| {
            let output = dir.join(format!("rank{rank}.out"));
            let file = File::create(&output).unwrap_or_else(|e| panic!("{output:?}: {e}"));
            let stderr = file.try_clone().unwrap_or_else(|e| panic!("{e}"));
            let mine = env
                .iter()
                .filter(|(only, _, _)| only.is_none_or(|r| r == rank))
                .map(|&(_, name, value)| (name, value));
            let process = Command::new(&exe)
                .args([test, "--exact", "--nocapture", "--test-threads=1"])
                .env(RANK, rank.to_string())
                .env(SIZE, size.to_string())
                .env(STORE, dir.join("store"))
                .env("HVD_START_TIMEOUT", "30")
                .envs(mine)
                .stdout(file)
                .stderr(stderr)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start rank {rank}: {e}"));
            Rank {
                process,
                output,
                exit: None,
            }
        })
        .collect()
}

/// Waits for every rank to exit; kills the ones still running at `deadline`.
pub fn wait(ranks: &mut [Rank], deadline: Instant) {
    loop {
        for rank in ranks.iter_mut().filter(|r| r.exit.is_none()) {
            rank.exit = rank.process.try_wait().ok().flatten();
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

/// Waits until every rank has printed `text`; fails the test after `timeout`, with each
/// rank's output.
pub fn wait_for_output(ranks: &[Rank], text: &str, timeout: Duration) {
    let started = Instant::now();
    while !ranks.iter().all(|r| r.output().contains(text)) {
        if started.elapsed() >= timeout {
            let outputs: Vec<String> = ranks
                .iter()
                .enumerate()
                .map(|(rank, r)| format!("rank {rank}:\n{}", r.output()))
                .collect();
            panic!(
                "not every rank printed {text:?} within {timeout:?}:\n{}",
                outputs.join("\n")
            );
        }
        thread::sleep(Duration::from_millis(10));
    }
}
