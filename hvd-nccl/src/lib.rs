//! # hvd-nccl: NVIDIA NCCL for GPU tensors
//!
//! [`NcclCollective`] implements [`hvd_core::Collective`] (backend name `"nccl"`) for
//! tensors in CUDA device memory, and [`CudaMemory`] is a device's memory as hvd-core's
//! [`DeviceMemory`](hvd_core::DeviceMemory). Both libraries are loaded at run time with
//! `dlopen`: NCCL (`HVD_NCCL_LIBRARY`, then `libnccl.so.2`, which pip's
//! `nvidia-nccl-cu12`/`cu13` wheels and runtime-only installs provide, then `libnccl.so`)
//! and the CUDA driver (`HVD_CUDA_LIBRARY`, then `libcuda.so.1`), so the crate builds and
//! runs on a machine without CUDA: a missing library or symbol is an
//! [`Error`](hvd_core::Error) naming it and how to get it, never a panic. hvd binds the few
//! entry points it calls itself rather than through cudarc, whose loader panics on a
//! missing library and whose `dynamic-linking` and `dynamic-loading` features cannot meet
//! in one build (candle turns on the first). NCCL 2.18 or newer is required.
//!
//! ## Forming the group
//! [`NcclCollective::connect`]`(store, topology, config)`: every rank records its process
//! in the rendezvous store; rank 0 makes the NCCL unique id and publishes it there; every
//! rank joins the communicator without blocking (`ncclCommInitRankConfig` with
//! `blocking = 0`) on its CUDA device (`HVD_NCCL_DEVICE`, else its local rank modulo the
//! devices it sees) and waits up to `HVD_START_TIMEOUT`, after which the error names the
//! ranks that never reached the store. Each group has a non-blocking stream of its own.
//! A host with more local ranks than GPUs (a test machine with one GPU) is supported:
//! before its first NCCL call, each rank sets `NCCL_HOSTID` of its own (NCCL 2.28
//! refuses ranks sharing a GPU of one host) or, on NCCL 2.30 and later,
//! `NCCL_MULTI_RANK_GPU_ENABLE=1`, unless the user set either.
//! `split` is `ncclCommSplit`, with a color that fingerprints the members (ranks that
//! disagree on them never share a communicator) and a stream of its own. A non-blocking
//! split hands back its communicator late: NCCL writes it into the caller's slot from its
//! own thread once the split ends, so hvd keeps that slot on the heap and reads it only
//! after the parent communicator is no longer in progress.
//!
//! ## Calls
//! Every call runs as one `ncclGroupStart`/`ncclGroupEnd` group on the stream, after the
//! work its buffers are [`Ready`](hvd_core::Ready) after (an event recorded on the
//! producer's stream, waited for on ours: the host never blocks on it), and returns once
//! the stream has run it, found by polling an event, which keeps the trait synchronous.
//!
//! | call | how |
//! |---|---|
//! | allreduce | `ncclAllReduce` per tensor, in place: NCCL's own op (`ncclAvg` for averages); float sums and averages with scale factors as `ncclRedOpCreatePreMulSum`; what NCCL cannot express exactly as hvd defines it (16-bit integers, other scale factors) through host memory, with hvd-core's kernels around an NCCL reduction |
//! | broadcast | `ncclBroadcast` per tensor, as bytes |
//! | allgather | `ncclAllGather` for equal counts, else `ncclSend`/`ncclRecv` straight into place |
//! | alltoall | `ncclSend`/`ncclRecv` per peer, a device copy for the rank's own block |
//! | reducescatter | `ncclReduceScatter` for equal blocks, else an `ncclReduce` onto each block's rank |
//! | barrier | an `ncclAllReduce` of one element |
//!
//! The transport's memory ([`Collective::device_memory`](hvd_core::Collective::device_memory))
//! queues copies on its stream (one `cuMemcpyBatchAsync` per batch with CUDA 13), so
//! Tensor Fusion packs device tensors without waiting in between.
//!
//! ## Failures
//! A wait for the device polls the stream's event and `ncclCommGetAsyncError`, for at most
//! `HVD_NCCL_TIMEOUT` (60 s). A failure ends the group: the rank posts what it saw in the
//! store (in the order the ranks fail), aborts its communicator (`ncclCommAbort`, which
//! ends the stuck work), and names the rank to blame, the same on every survivor: a rank
//! on this host whose process has exited ([`Error::PeerLost`](hvd_core::Error::PeerLost),
//! "its process (pid N) exited"), the rank that failed first on its own or left
//! (`PeerLost`, with its error), a rank that never reported
//! ([`Error::PeerSilent`](hvd_core::Error::PeerSilent)), or none when every rank timed out
//! in the call ([`Error::Timeout`](hvd_core::Error::Timeout)). The rank that failed first
//! reports its own error ([`Error::Device`](hvd_core::Error::Device)). Every later call
//! returns the same error.
//!
//! ## Environment
//! | variable | meaning | default |
//! |---|---|---|
//! | `HVD_NCCL_LIBRARY` | NCCL to load | `libnccl.so.2`, `libnccl.so` |
//! | `HVD_CUDA_LIBRARY` | CUDA driver to load | `libcuda.so.1` |
//! | `HVD_NCCL_DEVICE` | this rank's CUDA device | local rank modulo devices |
//! | `HVD_START_TIMEOUT` | seconds to form the communicator | 30 |
//! | `HVD_NCCL_TIMEOUT` | seconds a call waits for the device | 60 |

mod blame;
mod collective;
mod comm;
mod config;
mod cuda;
mod driver;
mod launch;
mod library;
pub mod mapping;
mod memory;
mod ops;
mod provider;
mod route;
mod sharing;

pub use collective::NcclCollective;
pub use config::NcclConfig;
pub use driver::CUDA_LIBRARY_VAR;
pub use library::{LIBRARY_VAR, MINIMUM, Version};
pub use memory::CudaMemory;
pub use provider::NcclProvider;

/// What this process would run NCCL on: the NCCL and CUDA driver versions and the devices
/// it sees, or why not (`hvdrun --check-build` prints it).
pub fn describe(config: &NcclConfig) -> hvd_core::Result<String> {
    let nccl = library::load(&config.nccl_library)?;
    let driver = driver::load(&config.cuda_library)?;
    let count = cuda::device_count(driver)?;
    // Each model once, with how many there are: `8 x NVIDIA H100 80GB HBM3`.
    let mut models: Vec<(String, usize)> = Vec::new();
    for ordinal in 0..count {
        let name = cuda::Device::open(driver, ordinal).map_or_else(|e| e.to_string(), |d| d.name());
        match models.iter_mut().find(|(n, _)| *n == name) {
            Some((_, n)) => *n += 1,
            None => models.push((name, 1)),
        }
    }
    let devices: Vec<String> = models
        .iter()
        .map(|(name, n)| format!("{n} x {name}"))
        .collect();
    Ok(format!(
        "NCCL {} ({}), CUDA driver {} ({}), {}",
        nccl.version,
        nccl.name,
        driver.version_text(),
        driver.name,
        if devices.is_empty() {
            "no CUDA device".into()
        } else {
            devices.join(", ")
        }
    ))
}

/// The CUDA device of the rank with local rank `local_rank`: `config.device` when set,
/// else the local rank modulo the devices this process sees (one rank per GPU).
pub fn device_of(config: &NcclConfig, local_rank: usize) -> hvd_core::Result<u32> {
    if let Some(ordinal) = config.device {
        return Ok(ordinal);
    }
    let driver = driver::load(&config.cuda_library)?;
    Ok(local_rank as u32 % cuda::device_count(driver)?.max(1))
}

/// How many CUDA devices this process sees through the driver `config` loads.
pub fn device_count(config: &NcclConfig) -> hvd_core::Result<u32> {
    cuda::device_count(driver::load(&config.cuda_library)?)
}

/// The version of the NCCL that `config` loads, or why it cannot load one.
pub fn version(config: &NcclConfig) -> hvd_core::Result<Version> {
    library::load(&config.nccl_library).map(|n| n.version)
}
