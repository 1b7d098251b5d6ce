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
//! - the runtime ([`init`], [`Hvd`], [`ProcessSet`]): named asynchronous collectives
//!   negotiated by a background thread per process set, so ranks may submit in any
//!   order; a response cache; Tensor Fusion; the stall inspector; join; process sets;
//!   the Timeline; autotuning; configuration from `HVD_*` / `HOROVOD_*` variables
//!   ([`Config`]);
//! - the whole contract of [`hvd_core`] (re-exported as [`core`]): [`Collective`], dtypes,
//!   tensor views, reduction semantics, rendezvous stores;
//! - [`World`]: rank, size and rendezvous from hvdrun, mpirun, Slurm or torchrun;
//! - [`transport`]: the transport chosen by Cargo features (`gloo-tcp`, on by default;
//!   `mpi`, picked automatically under mpirun);
//! - [`rendezvous`]: the HMAC-authenticated TCP store ranks find each other through;
//! - [`launch::Job`]: N ranks of a command on this host or over ssh on others,
//!   supervised, and the `hvdrun` launcher built on it;
//! - [`sampler::DistributedSampler`] (each rank its shard of every epoch's shuffle) and
//!   [`metrics`] (loss and accuracy of the whole job);
//! - `candle` (feature `candle`): Horovod's DistributedOptimizer and parameter broadcast
//!   for [candle](https://github.com/huggingface/candle) models;
//! - the `hvd-bench` tool: nccl-tests-style benchmarks of every collective and of the
//!   runtime, fusion and autotuning.
//!
//! The middleware stack is built in one place, `stack.rs`:
//! `Timeline<Fusion<transport>>`.

mod autotune;
#[cfg(feature = "candle")]
pub mod candle;
pub mod env;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
pub mod launch;
pub mod logging;
pub mod metrics;
pub mod rendezvous;
mod rng;
pub mod runtime;
pub mod sampler;
mod stack;
pub mod transport;
mod world;

pub use hvd_core::{
    self as core, Collective, DType, Device, Element, Error, ReduceOp, Reduction, Result, Store,
    Tensor, TensorMut, Topology,
};
pub use runtime::{
    Bools, Buffer, Builder, Config, Handle, Hvd, ProcessSet, Shaped, StatsSnapshot, init,
};
pub use transport::Backend;
pub use world::World;
