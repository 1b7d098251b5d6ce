//! # hvd-mpi: collectives over MPI, for jobs started by `mpirun`
//!
//! `MpiCollective` (feature `mpi`) implements [`hvd_core::Collective`] (backend name
//! `"mpi"`) over the system's MPI (Open MPI or MPICH), so that an hvd program started by
//! plain `mpirun`, Slurm's `srun` or Kubernetes' MPI Operator uses MPI for both its
//! control plane and its data. Host memory only.
//!
//! This crate is empty unless its `mpi` feature is on (the `hvd` facade's `mpi` feature
//! turns it on), so that the workspace builds on machines without MPI. With the feature,
//! the build needs MPI's development files and `mpicc` (or a `pkg-config` entry), and
//! `libclang` for the bindings: `apt-get install openmpi-bin libopenmpi-dev libclang-dev
//! clang pkg-config` (or `mpich libmpich-dev` for MPICH).
//!
//! ```no_run
//! # #[cfg(feature = "mpi")]
//! # fn main() -> hvd_core::Result<()> {
//! use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
//! use hvd_mpi::{MpiCollective, MpiConfig};
//!
//! let world = MpiCollective::world(MpiConfig::from_env()?)?; // MPI_Init_thread if needed
//! let mut grad = vec![1.0f32; 1024];
//! world.allreduce(&mut [TensorMut::from_slice("grad", &mut grad)], Reduction::new(ReduceOp::Average))?;
//! # Ok(()) }
//! # #[cfg(not(feature = "mpi"))]
//! # fn main() {}
//! ```
//!
//! ## Operations
//! | call | MPI |
//! |---|---|
//! | allreduce | `MPI_Allreduce(MPI_IN_PLACE)` per tensor (Tensor Fusion packs batches first) |
//! | broadcast | `MPI_Bcast` per tensor |
//! | allgather | `MPI_Allgatherv` (counts and displacements per rank) |
//! | alltoall | `MPI_Alltoallv` |
//! | reducescatter | `MPI_Reduce_scatter` |
//! | barrier | `MPI_Barrier` |
//! | split | `MPI_Comm_split` (members only get a communicator) |
//!
//! The group is a duplicate of `MPI_COMM_WORLD`, so a program's own MPI traffic never
//! mixes with hvd's. Ranks that share memory (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`)
//! are one host of the [`Topology`](hvd_core::Topology).
//!
//! ## Reductions
//! MPI's own operations run where MPI has the type and the same semantics as hvd: sum,
//! product, min and max of every integer type, sum and product of f32 and f64, and bool as
//! bytes with logical OR (sum, max) and AND (product, min). Everything else is a
//! user-defined `MPI_Op` that calls [`hvd_core::kernels`]: every op on f16 and bf16 (MPI
//! has no such types; they travel as 16-bit words), and float min and max (MPI's leave NaN
//! and -0 to the order in which ranks are combined; hvd's are IEEE 754-2019
//! `minimumNumber`/`maximumNumber`). Average is a sum divided by the group size afterwards,
//! and prescale and postscale are applied before and after, with the same kernels as every
//! other transport, so results match [`Reduction`](hvd_core::Reduction)'s documented
//! semantics exactly.
//!
//! ## Threads
//! hvd initialises MPI with `MPI_Init_thread(MPI_THREAD_MULTIPLE)` (or uses the program's
//! MPI if it initialised it first, and finalises MPI only if hvd initialised it, when the
//! last communicator is dropped). The runtime runs one background thread per process set,
//! each on its own communicator:
//! - with `MPI_THREAD_MULTIPLE` (Open MPI and MPICH provide it) they call MPI
//!   concurrently, each on its own communicator;
//! - with only `MPI_THREAD_SERIALIZED`, every MPI call takes a process-wide lock, and
//!   `split` is refused: two threads blocked in collectives of different communicators
//!   behind one lock could deadlock across ranks, so only the global set exists;
//! - below that, connecting fails with an error naming the level.
//!
//! Calls on one communicator are serialised, because MPI needs every rank to make them
//! in one order.
//!
//! ## Errors and timeouts
//! Communicators use `MPI_ERRORS_RETURN`: a failing MPI call is an
//! [`Error::Io`](hvd_core::Error::Io) naming the rank, the operation, the tensor, the MPI
//! function and MPI's own message. Bad arguments are refused before any MPI call, with the
//! same errors as every transport ([`hvd_core::validate`]).
//!
//! A blocking MPI collective cannot be cancelled, and a rank that never makes the matching
//! call blocks the others for ever. Non-blocking collectives polled against a deadline
//! would allow a clean error, but Open MPI runs them with other algorithms (libnbc):
//! `MPI_Iallreduce` polled with `MPI_Test` measured 1.9-2.8x slower than `MPI_Allreduce`
//! at 1 MiB and 1.4-2.1x at 64 MiB (2 ranks, shared memory). So calls block, and a
//! watchdog thread ends the job (`MPI_Abort`) once a call has run longer than
//! `HVD_MPI_TIMEOUT` (5 minutes by default: it bounds a whole call, so it leaves room for
//! gigabytes over a slow network), after printing the
//! [`Error::Timeout`](hvd_core::Error::Timeout) that names the rank, the operation and the
//! tensor. A rank that dies is reported by `mpirun`, which ends the other ranks.
//!
//! ## Environment
//! | variable | meaning | default |
//! |---|---|---|
//! | `HVD_MPI_TIMEOUT` | longest time one collective may block, e.g. `60`, `90s`, `5m` | 5 min |

#[cfg(feature = "mpi")]
mod collective;
#[cfg(feature = "mpi")]
mod comm;
#[cfg(feature = "mpi")]
mod config;
#[cfg(feature = "mpi")]
mod error;
#[cfg(feature = "mpi")]
mod library;
#[cfg(feature = "mpi")]
mod provider;
#[cfg(feature = "mpi")]
mod types;
#[cfg(feature = "mpi")]
mod user_ops;
#[cfg(feature = "mpi")]
mod watchdog;

#[cfg(feature = "mpi")]
pub use collective::MpiCollective;
#[cfg(feature = "mpi")]
pub use config::MpiConfig;
#[cfg(feature = "mpi")]
pub use library::{ThreadLevel, library_version};
#[cfg(feature = "mpi")]
pub use provider::MpiProvider;
