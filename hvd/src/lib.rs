//! # hvd: fast, easy distributed training, in the style of Horovod
//!
//! Every rank (one process per GPU or CPU socket) trains a copy of the model on its own
//! shard of the data; gradients are averaged with a bandwidth-optimal ring-allreduce
//! instead of a parameter server.
//!
//! ```no_run
//! use hvd::ReduceOp;
//!
//! # fn main() -> hvd::Result<()> {
//! let hvd = hvd::init()?;                        // 1. join the job the launcher started
//! let weights = hvd.broadcast("w", vec![0.5f32; 4], 0)?; // 2. same start everywhere
//! let grads = vec![hvd.rank() as f32; 4];       // 3. this rank's gradients...
//! let averaged = hvd.allreduce("grad.w", grads, ReduceOp::Average)?; // ...averaged
//! # let _ = (weights, averaged);
//! # Ok(())
//! # }
//! ```
//!
//! What is here:
//! - [`init`] and [`Builder`]: the transport chosen and connected from the job's
//!   environment, and the runtime started over it;
//! - the runtime ([`Hvd`], [`ProcessSet`], from [`hvd_runtime`], re-exported as
//!   [`runtime`]): named asynchronous collectives negotiated by a background thread per
//!   process set, so ranks may submit in any order; a response cache; Tensor Fusion; the
//!   stall inspector; join; process sets; the Timeline; autotuning; configuration from
//!   `HVD_*` / `HOROVOD_*` variables ([`Config`], read by [`env`](mod@env));
//! - the whole contract of [`hvd_core`] (re-exported as [`core`]): [`Collective`], dtypes,
//!   tensor views, reduction semantics, rendezvous stores;
//! - [`World`]: rank, size and rendezvous from hvdrun, mpirun, Slurm or torchrun;
//! - [`transport`]: the transport chosen by Cargo features (`gloo-tcp`, on by default;
//!   `mpi`, picked automatically under mpirun; `nccl`, for tensors in GPU memory,
//!   beside a host transport);
//! - `device` and `nccl` (feature `nccl`): CUDA device memory without a framework
//!   (`DeviceVec`) and the NCCL transport, tested against a GPU test double, never yet
//!   on a GPU;
//! - [`rendezvous`] ([`hvd_rendezvous`]): the HMAC-authenticated TCP store ranks find
//!   each other through; the launcher (`hvdrun`, and its library `Job`) is a crate of
//!   its own;
//! - [`elastic`]: training that survives lost hosts and grows with new ones, under
//!   `hvdrun --elastic`;
//! - [`sampler::DistributedSampler`] (each rank its shard of every epoch's shuffle) and
//!   [`metrics`] (loss and accuracy of the whole job);
//! - `data` ([`hvd_data`], feature `data`, on by default): the input pipeline, images
//!   decoded and augmented on a pool of threads into batches cut from the elastic
//!   sampler, every example once per epoch whatever the job's size; and `data_stall`:
//!   how much of each epoch the job lost waiting for some rank's data, and which rank;
//!   and `data_tune`: every rank's loader tuned at once, a host's cores split between
//!   its ranks by what each needs;
//! - `candle` (feature `candle`): Horovod's DistributedOptimizer and parameter broadcast
//!   for [candle](https://github.com/huggingface/candle) models (their CUDA tensors with
//!   feature `candle-cuda`);
//! - the `hvd-bench` crate: nccl-tests-style benchmarks of every collective and of the
//!   runtime, fusion and autotuning.
//!
//! The runtime puts its middleware together, `Timeline<Fusion<Router>>`, in one place
//! (`hvd-runtime`'s `Stack`); what is under the Router is connected in [`transport`],
//! whose documentation draws the whole stack.

// The book's Rust examples as doctests.
#[cfg(doctest)]
mod book;
mod builder;
#[cfg(feature = "candle")]
pub mod candle;
#[cfg(feature = "data")]
pub mod data_stall;
#[cfg(feature = "data")]
pub mod data_tune;
#[cfg(feature = "nccl")]
pub mod device;
pub mod elastic;
pub mod logging;
pub mod metrics;
pub mod sampler;
pub mod transport;
mod witness;
mod world;

pub use builder::{Builder, init};
pub use hvd_core::{
    self as core, Collective, Compression, DType, Device, Element, Error, ReduceOp, Reduction,
    Result, Store, Tensor, TensorMut, Topology, env,
};
/// The input pipeline (feature `data`, on by default).
#[cfg(feature = "data")]
pub use hvd_data as data;
/// The NCCL transport and CUDA device memory (feature `nccl`).
#[cfg(feature = "nccl")]
pub use hvd_nccl as nccl;
pub use hvd_rendezvous as rendezvous;
pub use hvd_runtime::{
    self as runtime, Bools, Buffer, Config, Handle, Hvd, ProcessSet, Shaped, StatsSnapshot,
};
pub use transport::Backend;
pub use world::World;
