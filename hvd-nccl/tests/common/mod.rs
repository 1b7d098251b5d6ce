//! What the tests share: the GPU test double's configuration, groups of ranks as threads,
//! and ranks as processes (hvd-testkit's, with the double's settings in their
//! environment).

// Each test binary compiles this module and uses its own part of it.
#![allow(dead_code, unused_imports)]

use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use hvd_core::{DeviceMemory, MemoryStore, Store, Topology};
use hvd_nccl::{CudaMemory, NcclCollective, NcclConfig};
use hvd_testkit::processes::{self, RankEnv};

pub use hvd_testkit::processes::{Rank, wait};

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
    let child = processes::child()?;
    let config = NcclConfig::from_env().unwrap();
    let connected = rank(child.store, child.rank, child.size, &config);
    Some((child.rank, child.size, connected))
}

/// The double's settings for every rank, then `env` (`(rank, name, value)`, `None` for
/// every rank).
pub fn with_double<'a>(env: &[RankEnv<'a>]) -> Vec<RankEnv<'a>> {
    static DOUBLE: LazyLock<String> = LazyLock::new(double);
    let mut all: Vec<RankEnv<'a>> = vec![
        (None, "HVD_NCCL_LIBRARY", &DOUBLE),
        (None, "HVD_CUDA_LIBRARY", &DOUBLE),
        (None, "HVD_START_TIMEOUT", "60"),
        (None, "HVD_NCCL_TIMEOUT", "60"),
    ];
    all.extend_from_slice(env);
    all
}

/// Starts `size` ranks running `test` of this binary, each with the double and `env`.
pub fn launch(test: &str, size: usize, dir: &Path, env: &[RankEnv<'_>]) -> Vec<Rank> {
    let every: Vec<usize> = (0..size).collect();
    processes::launch_ranks(test, size, &every, dir, &with_double(env))
}

/// Waits until every rank printed `line`, failing after a minute.
pub fn await_line(ranks: &[Rank], line: &str) {
    processes::wait_for_output(ranks, line, Duration::from_secs(60));
}
