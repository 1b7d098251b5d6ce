//! # hvd: fast, easy distributed training, in the style of Horovod
//!
//! Every rank (one process per GPU or CPU socket) trains a copy of the model on its own
//! shard of the data; gradients are averaged with a bandwidth-optimal ring-allreduce
//! instead of a parameter server.
//!
//! This is the crate users depend on. Today it offers:
//! - the whole contract of [`hvd_core`] (re-exported): [`Collective`], dtypes, tensor
//!   views, reduction semantics, rendezvous stores;
//! - [`World`]: this process's rank, size and rendezvous, from the launcher's environment;
//! - [`transport::connect`]: the transport chosen by Cargo features (`gloo-tcp`, on by
//!   default), connected to the other ranks;
//! - the `hvd-bench` tool: nccl-tests-style benchmarks of every collective.
//!
//! The runtime (named asynchronous collectives, negotiation, Tensor Fusion, Timeline) is
//! built on these pieces.

mod autotune;
pub mod env;
pub mod launch;
mod logging;
pub mod runtime;
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
