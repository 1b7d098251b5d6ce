//! The transports: the ones compiled in (`providers.rs`, one line each), choosing one
//! (`choose.rs`), connecting it (`connect.rs`, with `hierarchy.rs` across hosts), and
//! diagnosing what a host offers them (`diagnose.rs`). Each transport crate says what it
//! can do through its [`Provider`](hvd_core::provider::Provider); these files ask the
//! list and hold nothing per transport.
//!
//! Which transport a job uses, in order: the builder's
//! [`Builder::backend`](crate::Builder::backend); else `HVD_BACKEND` (alias
//! `HOROVOD_CPU_OPERATIONS`); else MPI when the `mpi` feature is compiled in and mpirun
//! started the process; else shared memory (feature `shm`, on by default) when the
//! launcher says every rank is on this host; else the first compiled in (TCP).
//!
//! `nccl` (feature `nccl`) is a transport for device memory: with it, tensors in CUDA
//! memory go over NCCL, and host tensors and negotiation over the transport the same
//! rules pick without it.
//!
//! What a tensor goes down, top to bottom, and where each layer is put on:
//!
//! ```text
//! Timeline            hvd-runtime, Stack::wrap: a span per tensor and collective
//! Fusion              hvd-runtime, Stack::wrap: a cycle's batch packed into few calls
//! Router              connect.rs, router: each call to the transport for its memory
//! ├ LossWitness       connect.rs, witnessed (under hvdrun): tells it the lost peer
//! │ └ Hierarchical    hierarchy.rs (across hosts): shm within a host
//! │   └ tcp | rdma | shm | mpi
//! ├ LossWitness<nccl> connect.rs, device_transport: device memory (feature nccl)
//! └ host staging      connect.rs, staging: other device memory through the host
//! ```

mod choose;
mod connect;
mod diagnose;
mod hierarchy;
mod providers;

pub use choose::Backend;
pub use connect::{connect, connect_device, staging, world};
pub(crate) use connect::{connect_start, router};
