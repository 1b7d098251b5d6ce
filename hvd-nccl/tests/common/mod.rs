//! What the tests share: the GPU test double's configuration, groups of ranks as threads,
//! and ranks as processes (this test binary run once per rank, meeting through a
//! `FileStore`, with the double's settings in their environment).

// Each test binary compiles this module and uses its own part of it.
#![allow(dead_code)]

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd_core::{DeviceMemory, FileStore, MemoryStore, Store, Topology};
use hvd_nccl::{CudaMemory, NcclCollective, NcclConfig};

const RANK: &str = "HVD_NCCL_TEST_RANK";
const SIZE: &str = "HVD_NCCL_TEST_SIZE";
const STORE: &str = "HVD_NCCL_TEST_STORE";

/// The double cargo built next to this test.
pub fn double() -> String {
    hvd_gpu_double::library_path()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// A config that loads the double, with timeouts generous for a loaded machine.
pub fn config() -> NcclConfig {
    let mut config = NcclConfig::default().with_libraries(double(), double());
    config.start_timeout = Duration::from_secs(60);
    config.op_timeout = Duration::from_secs(60);
    config
}

/// A rank's transport and the memory its tests allocate, or why connecting failed.
pub type Connected = hvd_core::Result<(NcclCollective, Arc<dyn DeviceMemory>)>;

/// One rank's transport and the memory (with a stream of its own, on the same device)
/// its tests allocate.
pub fn rank(store: Arc<dyn Store>, rank: usize, size: usize, config: &NcclConfig) -> Connected {
    let group = NcclCollective::connect(store, Topology::single_host(rank, size), config.clone())?;
    let hvd_core::Device::Cuda(ordinal) = group.device() else {
        unreachable!("an NCCL transport is on a CUDA device")
    };
    let memory: Arc<dyn DeviceMemory> = CudaMemory::new(config, ordinal, rank)?;
    Ok((group, memory))
}

/// The config of rank `rank` as a thread: a device of its own (the double has 8), as
/// ranks sharing a device in one process deadlock on `cuMemFree`, as on a GPU.
pub fn thread_config(rank: usize) -> NcclConfig {
    let mut config = config();
    config.device = Some(rank as u32);
    config
}

/// Runs `body` on `size` ranks as threads of this process, over one in-memory store.
pub fn threads<T: Send>(
    size: usize,
    body: impl Fn(NcclCollective, Arc<dyn DeviceMemory>) -> T + Sync,
) -> Vec<T> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|r| {
                let (store, body) = (store.clone(), &body);
                s.spawn(move || {
                    let (group, memory) = rank(store, r, size, &thread_config(r)).unwrap();
                    body(group, memory)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// In a child process: its rank, the group size and its transport (configured from the
/// environment, as a job's rank would be), or the error connecting gave.
pub fn child() -> Option<(usize, usize, Connected)> {
    let rank: usize = std::env::var(RANK).ok()?.parse().ok()?;
    let size: usize = std::env::var(SIZE).ok()?.parse().ok()?;
    let store: Arc<dyn Store> = Arc::new(FileStore::new(std::env::var(STORE).ok()?).unwrap());
    let config = NcclConfig::from_env().unwrap();
    Some((rank, size, self::rank(store, rank, size, &config)))
}

/// One child process and the file its output goes to.
pub struct Rank {
    pub process: Child,
    output: PathBuf,
    pub exit: Option<ExitStatus>,
}

impl Rank {
    pub fn output(&self) -> String {
        fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// The rest of the first line after `marker` (the test harness may print its own
    /// words before it on the same line).
    pub fn line(&self, marker: &str) -> Option<String> {
        self.output()
            .lines()
            .find_map(|l| l.find(marker).map(|at| l[at + marker.len()..].to_owned()))
    }
}

/// Starts `size` ranks running `test` of this binary, each with the double and `env`
/// (`(rank, name, value)`, `None` for every rank).
pub fn launch(
    test: &str,
    size: usize,
    dir: &Path,
    env: &[(Option<usize>, &str, &str)],
) -> Vec<Rank> {
    launch_ranks(test, size, &(0..size).collect::<Vec<_>>(), dir, env)
}

/// Like [`launch`], but only the ranks in `ranks` of a group of `size`.
pub fn launch_ranks(
    test: &str,
    size: usize,
    ranks: &[usize],
    dir: &Path,
    env: &[(Option<usize>, &str, &str)],
) -> Vec<Rank> {
    let double = double();
    ranks
        .iter()
        .map(|&rank| {
            let output = dir.join(format!("rank{rank}.out"));
            let file = File::create(&output).unwrap();
            let mut command = Command::new(std::env::current_exe().unwrap());
            command
                .args([test, "--exact", "--nocapture", "--test-threads=1"])
                .env(RANK, rank.to_string())
                .env(SIZE, size.to_string())
                .env(STORE, dir.join("store"))
                .env("HVD_NCCL_LIBRARY", &double)
                .env("HVD_CUDA_LIBRARY", &double)
                .env("HVD_START_TIMEOUT", "60")
                .env("HVD_NCCL_TIMEOUT", "60")
                .stdout(file.try_clone().unwrap())
                .stderr(file);
            for (only, name, value) in env {
                if only.is_none_or(|r| r == rank) {
                    command.env(name, value);
                }
            }
            Rank {
                process: command.spawn().unwrap(),
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
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every rank printed `line`, failing after a minute.
pub fn await_line(ranks: &[Rank], line: &str) {
    let started = Instant::now();
    while !ranks.iter().all(|r| r.output().contains(line)) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the ranks never printed {line:?}:\n{}",
            ranks
                .iter()
                .map(Rank::output)
                .collect::<Vec<_>>()
                .join("\n---\n")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
