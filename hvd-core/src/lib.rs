//! # hvd-core: the contract every hvd transport and middleware implements
//!
//! hvd is data-parallel training in the style of Horovod: every rank trains a copy of the
//! model on its own shard of the data, and gradients are averaged with collectives
//! (ring-allreduce and friends) instead of a parameter server. This crate is the part
//! everything else depends on:
//!
//! - [`Collective`]: the trait a transport implements (TCP, MPI, NCCL, RDMA, or yours),
//!   and that middleware (Tensor Fusion, the Timeline) implements by wrapping another one
//!   as a [`Layer`](layer::Layer), which sees every call as one [`Operation`];
//! - [`driver`]: what transports that run [`schedule`]s share (the group behind one lock,
//!   the call sequence, poisoning by the first failure, sub-group names), so that such a
//!   transport brings only its event loop;
//! - the vocabulary: [`DType`], [`ReduceOp`] and [`Reduction`], [`Device`], tensor views
//!   ([`Tensor`], [`TensorMut`]) over host memory or device memory ([`DeviceBuffer`], with
//!   the work that writes it: [`Ready`]), [`Topology`];
//! - [`DeviceMemory`]: a device's memory with a stream of its own (allocate, copy to and
//!   from the host, batched device copies), which device transports offer the layers
//!   above and the conformance suite runs on;
//! - [`kernels`]: the reduction kernels, the single definition of reduction semantics;
//!   [`adasum`]: Horovod's scale-invariant combination of gradients, as an algorithm over
//!   any `Collective`;
//! - [`Store`]: rendezvous key-value storage, with in-memory and shared-directory
//!   implementations;
//! - [`Error`]: the one error type;
//! - [`env`](mod@env): `HVD_*` variables, with Horovod's `HOROVOD_*` names as aliases, read the
//!   same way by every crate; [`rng`]: the seeded generator every rank draws alike;
//!   [`sampler`]: the order in which a job visits its dataset, alike on every rank;
//! - [`schedule`]: the collective algorithms (ring, recursive doubling, halving and
//!   doubling, pairwise exchange, trees, barrier) as sans-IO state machines that any
//!   transport's I/O engine can drive;
//! - [`wire`]: the [`Writer`](wire::Writer) and [`Reader`](wire::Reader) every codec of
//!   bytes between processes is written with, whose errors name the field that was wrong;
//!   [`auth`]: the proofs with which connections show they hold the job's secret;
//! - [`reference`](mod@reference): an in-process transport (ranks as threads), simple and obviously
//!   correct, for testing middleware and runtimes without sockets;
//! - `conformance` (feature `conformance`): the public suite every `Collective` must pass;
//! - [`provider`]: what a transport crate offers the facade that puts a job's stack
//!   together (detect, connect, report).
//!
//! ## Writing a transport
//! Implement [`Collective`] for a type that holds one rank's connection to the group, run
//! the checks of [`validate`] at the top of each method, reduce with [`kernels`], and prove
//! it with `hvd_core::conformance::run_threads` (one instance per thread) or
//! `hvd_core::conformance::run_rank` (one instance per process).
//!
//! ## How other transports map onto the trait
//! The trait is synchronous, batched, counts in elements, and names tensors only for
//! messages, so that very different libraries fit it without changes:
//!
//! - **MPI**: `allreduce` is `MPI_Allreduce(MPI_IN_PLACE)` per tensor with MPI's own
//!   datatypes and ops (f16/bf16 and bool through a user-defined `MPI_Op` that calls
//!   [`kernels`]); `allgather` is `MPI_Allgatherv` with `counts` as recvcounts;
//!   `broadcast` is `MPI_Bcast`; `alltoall` is `MPI_Alltoallv`; `reducescatter` is
//!   `MPI_Reduce_scatter`; `split` is `MPI_Comm_create_group` (members only) after an
//!   agreement on the parent communicator. Errors come from `MPI_ERRORS_RETURN`.
//! - **NCCL**: tensors carry [`Device::Cuda`] memory as [`DeviceBuffer`]s, each with the
//!   work that writes it ([`Ready`]: a stream or an event), and the transport answers
//!   `supports(Device::Cuda(_))`; a batch becomes one `ncclGroupStart` / `ncclGroupEnd`
//!   group of `ncclAllReduce` calls (with `ncclAvg` and `ncclRedOpCreatePreMulSum` for
//!   the scale factors) on the transport's stream, after the inputs' work, and the call
//!   returns once the stream has run it, which keeps the trait synchronous.
//!   `allgather` with unequal counts and `alltoall` are grouped `ncclSend`/`ncclRecv`;
//!   `split` is `ncclCommSplit`. The transport's [`DeviceMemory`]
//!   ([`Collective::device_memory`]) lets Tensor Fusion pack device tensors on its
//!   stream. A missing libcuda/libnccl is [`Error::LibraryMissing`].
//! - **libfabric / ibverbs**: the same ring algorithms as TCP over reliable datagram
//!   endpoints (`FI_EP_RDM`) with registered memory; the transport registers the caller's
//!   buffers per call (or copies through a registered bounce buffer), which the
//!   borrow-for-one-call rule of [`Tensor`] allows.
//!
//! A router that sends CPU tensors to one transport and CUDA tensors to another is itself
//! a `Collective`: it asks [`Collective::supports`] and forwards.

pub mod adasum;
pub mod auth;
pub mod collective;
pub mod compression;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod device;
pub mod device_memory;
pub mod driver;
pub mod dtype;
pub mod dynlib;
pub mod env;
pub mod error;
pub mod kernels;
pub mod layer;
pub mod net;
pub mod op;
pub mod operation;
pub mod process;
pub mod provider;
pub mod reference;
pub mod rng;
pub mod sampler;
pub mod schedule;
pub mod store;
pub mod summary;
pub mod tensor;
pub mod topology;
pub mod trace;
pub mod units;
pub mod validate;
pub mod wire;

pub use collective::{Collective, allgather_bytes, gather_counts, split_by_counts};
pub use compression::Compression;
pub use device::Device;
pub use device_memory::{DeviceBlock, DeviceCopy, DeviceMemory};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use op::{ReduceOp, Reduction};
pub use operation::{OpKind, Operation};
pub use store::{FileStore, MemoryStore, PrefixStore, Store};
pub use tensor::{DeviceBuffer, Memory, MemoryMut, Ready, Tensor, TensorMut, batch_name};
pub use topology::Topology;

pub use half::{bf16, f16};
