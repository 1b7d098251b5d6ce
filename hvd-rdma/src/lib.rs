//! # hvd-rdma: collectives over libfabric
//!
//! [`RdmaCollective`] implements [`hvd_core::Collective`] (backend name `"rdma"`) over
//! libfabric's reliable datagram endpoints (`FI_EP_RDM`) with tagged messages, on
//! whichever provider the machine has: `verbs` (InfiniBand, RoCE), `efa` (AWS), `shm`
//! (one host) or `tcp` (anywhere). Host memory only.
//!
//! ```no_run
//! use std::sync::Arc;
//! use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, TensorMut};
//! use hvd_rdma::{RdmaCollective, RdmaConfig};
//!
//! # fn main() -> hvd_core::Result<()> {
//! let store = Arc::new(MemoryStore::new()); // shared by every rank (threads here)
//! let group = RdmaCollective::connect(store, 0, 1, RdmaConfig::from_env()?)?;
//! let mut grad = vec![1.0f32; 1024];
//! group.allreduce(&mut [TensorMut::from_slice("grad", &mut grad)], Reduction::new(ReduceOp::Average))?;
//! # Ok(()) }
//! ```
//!
//! ## libfabric at run time
//! libfabric (1.17 or later) is loaded with `dlopen` on first use (`libfabric.so.1`, then
//! `libfabric.so`, or `HVD_LIBFABRIC_LIBRARY`), so building needs no system library and a
//! machine without it gets [`Error::LibraryMissing`](hvd_core::Error::LibraryMissing)
//! naming the package to install. The bindings (`src/sys`) are generated from the
//! headers by `bindings/generate.sh` and checked in.
//!
//! ## Forming a group
//! Each rank opens a fabric, domain, completion queue, address vector and endpoint on the
//! chosen provider ([`RdmaConfig::provider`], `HVD_RDMA_PROVIDER` or `FI_PROVIDER`; by
//! default the first of [`PREFERENCE`] offered), publishes the endpoint's address under
//! `rdma/addr/<rank>` in the [`Store`](hvd_core::Store), reads everyone's into the
//! address vector in rank order, and waits until every rank has done so. A rank that
//! never appears is named in the error after `start_timeout`.
//!
//! ## Algorithms
//! The schedules of [`hvd_core::schedule`], as over TCP, chosen by
//! [`hvd_core::schedule::choice`] from `small_bytes` (256 KiB, capped at the provider's
//! largest message), with pipelined transfers in messages of `chunk_bytes` (2 MiB). Every
//! frame is a tagged message (tag: call number, sender, frame number, so receives accept
//! any source and need no `FI_DIRECTED_RECV`); up to four per peer and direction are in
//! flight. Frames of 32 KiB and more leave straight from the tensors (`fi_tsendv`) when
//! the provider needs no local registration; smaller ones, and every frame of a provider
//! with `FI_MR_LOCAL` (verbs, EFA), go through bounce buffers the endpoint registers
//! once. Frames that only overwrite their range (ring allgather, chains) land straight
//! in the tensors the same way; frames to reduce land in bounce buffers and are reduced
//! from there with [`hvd_core::kernels`], in the order the schedule released them.
//!
//! ## Waiting
//! The calling thread drives the provider (manual progress): it polls the completion
//! queue, yielding between polls, for 1 ms (50 µs when ranks outnumber cores). After
//! that, over `tcp` (and rxm over it), it blocks on the queue's wait descriptor
//! (`fi_trywait`, then `ppoll`, waking at least every 10 ms to check its deadline), so a
//! late peer costs almost no CPU and ranks sharing a core run. Shared memory wakes no
//! descriptor and `sockets` gives none under manual progress: there a rank naps 20 µs
//! between polls, as it does over rxm told to wait on `pollfd` sets
//! (`FI_OFI_RXM_DEF_WAIT_OBJ` or `FI_OFI_RXM_DEF_TCP_WAIT_OBJ`), which wake on no data.
//!
//! ## Faults
//! Every wait has a deadline: when no message completes for `op_timeout`
//! (`HVD_RDMA_TIMEOUT`, 60 s) the call fails with
//! [`Error::Timeout`](hvd_core::Error::Timeout) naming the ranks it waits for and the
//! provider; an operation the provider fails is
//! [`Error::PeerLost`](hvd_core::Error::PeerLost) with libfabric's text (`fi_strerror`
//! and the provider's own). The rank that fails first sends an abort (culprit, reporter,
//! cause) to every other rank, on a tag bit no frame uses and for which a receive is
//! always posted, so ranks that wait on someone else fail at once with
//! `PeerLost { peer: <culprit>, cause: "reported by rank X: ..." }`. Providers without
//! connections (shm) report no death, so a rank that times out first gives its peers a
//! moment (a quarter of `op_timeout`, at most 5 s) to report one, then checks whether
//! the process of a rank on its host has exited (ranks publish pid and pid namespace)
//! and names that rank. After a failure the group is poisoned: every later call returns
//! the same error at once.
//!
//! A limit of libfabric's `shm` provider: a send spins on a lock in the receiver's
//! shared memory, and a receiver killed while holding it leaves the sender spinning
//! inside `fi_tsendv`, where no timeout of ours can reach (about one kill in seven in
//! our tests, when ranks allreduce without pause). Before every send hvd checks that a
//! peer on its host is alive and fails naming it if not, which covers a peer that died
//! before the send; a rank caught in the spin is ended by its launcher (hvdrun stops
//! the remaining ranks once the others have failed naming the dead one). Within a host
//! the `shm` transport (`hvd-shm`), hvd's default there, has no such lock.
//!
//! ## Environment
//! | variable | meaning | default |
//! |---|---|---|
//! | `HVD_RDMA_PROVIDER` (alias `FI_PROVIDER`) | libfabric provider | first of [`PREFERENCE`] offered |
//! | `HVD_LIBFABRIC_LIBRARY` | libfabric to load | `libfabric.so.1`, then `libfabric.so` |
//! | `HVD_START_TIMEOUT` | seconds to form the group | 30 |
//! | `HVD_RDMA_TIMEOUT` | seconds a call waits without progress | 60 |
//! | `HVD_RDMA_SMALL_BYTES` | crossover to the latency-optimal algorithms | 256K |
//! | `HVD_RDMA_CHUNK_BYTES` | message size of rings and chains | 2M |
//!
//! ## Discovery
//! [`providers`] lists what libfabric offers for hvd here; [`devices`] lists the RDMA
//! devices and ports libibverbs sees, for `hvdrun --check`.

mod collective;
mod config;
mod devices;
mod endpoint;
mod engine;
mod info;
mod library;
mod provider;
mod rendezvous;
mod sys;

pub use collective::RdmaCollective;
pub use config::RdmaConfig;
pub use devices::{Device, Port, devices};
pub use info::{PREFERENCE, Provider, providers};
pub use provider::RdmaProvider;
