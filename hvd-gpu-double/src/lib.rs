//! # hvd-gpu-double: a GPU test double for hvd's GPU path
//!
//! A shared library exporting the entry points of the CUDA driver (`cu*`) and of NCCL
//! (`nccl*`) that hvd binds, with their real C signatures (checked by compiling a C
//! program against the real `cuda.h` and `nccl.h`, see `tests/abi.rs`), so that hvd's GPU
//! code runs and is tested on machines without a GPU: point `HVD_CUDA_LIBRARY` and
//! `HVD_NCCL_LIBRARY` at `libhvd_gpu_double.so` ([`library_path`]). Test support only:
//! never published, and nothing is said to work on a GPU because it works here.
//!
//! ## What it imitates, and where it is stricter than a GPU
//! - **Device memory** lives in an address range the host cannot touch (mapped
//!   `PROT_NONE`), backed by a second mapping only the double reads and writes: a host
//!   dereference of a device pointer crashes as it would on a GPU. New allocations hold
//!   `0xCD` bytes, not zeros. `cuPointerGetAttribute` answers truthfully (memory type,
//!   device ordinal, context, range). `cuMemFree` waits for the device's queued work,
//!   like `cudaFree`. `HVD_GPU_DOUBLE_MEMORY` bounds each device's memory.
//! - **Contexts** are current per thread: calls that need one fail with
//!   `CUDA_ERROR_INVALID_CONTEXT` on a thread that set none, and everything fails with
//!   `CUDA_ERROR_NOT_INITIALIZED` before `cuInit`.
//! - **Streams** are worker threads running their queue in order; the legacy NULL stream
//!   synchronises with blocking streams as CUDA's does, and non-blocking ones do not.
//!   **Events** are sequence numbers of a stream's queue. Host-to-device copies read
//!   their source when enqueued (pageable memory); device-to-host copies write their
//!   destination when the stream runs them (pinned memory), so a reader that does not
//!   wait sees stale bytes.
//! - **Lazy mode** (`HVD_GPU_DOUBLE_LAZY=1`): a stream runs a task only once something
//!   waits for it (the host through a synchronising call, an event query or a synchronous
//!   copy; another stream through an event), so a reader that skips a wait reads the old
//!   bytes every time instead of passing by luck, and non-blocking NCCL calls stay in
//!   progress a little longer.
//! - **NCCL communicators** come from a unique id naming a shared-memory segment through
//!   which ranks exchange data, so ranks may be threads or processes. Every collective
//!   hvd uses: `ncclAllReduce` (`ncclAvg`, `ncclRedOpCreatePreMulSum`), `ncclBroadcast`,
//!   `ncclReduce`, `ncclAllGather`, `ncclReduceScatter`, `ncclSend`/`ncclRecv` in
//!   groups, `ncclCommSplit`, non-blocking initialisation (and non-blocking groups, which
//!   return `ncclInProgress` until enqueued), `ncclCommGetAsyncError`,
//!   `ncclGetLastError`, `ncclCommAbort`. Reductions are written here, independently of
//!   hvd-core's kernels.
//! - **Stricter than NCCL**: before moving data the ranks compare every call's signature
//!   (operation, count, datatype, reduction, root; for send/recv, each pair's counts), and
//!   a disagreement is an asynchronous `ncclInvalidUsage` whose `ncclGetLastError` text
//!   names both ranks and calls, instead of a hang or garbage. A peer whose process exits,
//!   or that aborts or destroys its communicator, is an asynchronous `ncclRemoteError` on
//!   the ranks waiting for it. Every rank of a communicator must take part in each group
//!   (hvd always does).
//!
//! ## Faults on demand
//! `HVD_GPU_DOUBLE_FAULTS` holds `;`-separated faults, each `kind:key=value,...`:
//!
//! | fault | effect |
//! |---|---|
//! | `fail:call=NAME,nth=N[,rank=R]` | the N-th call of entry point NAME (of rank R's communicator) returns an error (`ncclSystemError`, `CUDA_ERROR_UNKNOWN`) |
//! | `remote-error:nth=N[,rank=R]` | the N-th collective a stream runs (for rank R) raises an asynchronous `ncclRemoteError` and stalls, as NCCL's kernels do, until the communicator is aborted |
//! | `hang:nth=N[,rank=R]` | the N-th collective stalls silently until the communicator is aborted |
//! | `oom:nth=N` | the N-th `cuMemAlloc` fails with `CUDA_ERROR_OUT_OF_MEMORY` |
//! | `version:code=C` | `ncclGetVersion` reports C (`21203` is NCCL 2.12.3) |
//!
//! A malformed value makes `cuInit` and `ncclGetVersion` fail and is printed on stderr.
//!
//! ## The call trace
//! With `HVD_GPU_DOUBLE_TRACE=<file>`, every entry point appends one line to the file:
//! `<pid> <function> key=value ...` (`rank=` for NCCL calls, `bytes=`, `count=`, ...).
//! [`Trace`] reads it back, so tests can count what was fused and how many copies ran.
//!
//! ## Other settings
//! `HVD_GPU_DOUBLE_DEVICES` (default 8) devices per process; `HVD_GPU_DOUBLE_MEMORY`
//! (default `8G`) bytes per device. Ranks that are threads of one process should each
//! take a device of their own, as on a GPU: `cuMemFree` waits for the whole device, so
//! one rank freeing memory while another's collective waits for it deadlocks, as NCCL
//! warns.

mod config;
mod cuda;
mod fault;
mod handles;
mod inject;
mod memory;
mod nccl;
mod support;
#[cfg(test)]
mod tests;
mod trace;

pub use support::{
    DEVICES_VAR, FAULTS_VAR, LAZY_VAR, MEMORY_VAR, TRACE_VAR, Trace, TraceLine, library_path,
};
