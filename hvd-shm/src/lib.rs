//! # hvd-shm: collectives through shared memory, for the ranks of one host
//!
//! [`ShmCollective`] implements [`hvd_core::Collective`] (backend name `"shm"`) for ranks
//! that share a host, through one shared-memory segment per group: no sockets, no system
//! library beyond libc. Linux only (it needs `/dev/shm` and futexes). Host memory only.
//!
//! ```no_run
//! use std::sync::Arc;
//! use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, TensorMut};
//! use hvd_shm::{ShmCollective, ShmConfig};
//!
//! # fn main() -> hvd_core::Result<()> {
//! let store = Arc::new(MemoryStore::new()); // shared by every rank (threads here)
//! let mut config = ShmConfig::from_env()?;
//! config.op_timeout = std::time::Duration::from_secs(30);
//! let group = ShmCollective::connect(store, 0, 1, config)?;
//! let mut grad = vec![1.0f32; 1024];
//! group.allreduce(&mut [TensorMut::from_slice("grad", &mut grad)], Reduction::new(ReduceOp::Average))?;
//! # Ok(()) }
//! ```
//!
//! ## Public API
//! - [`ShmCollective::connect`]`(store, rank, size, config)` joins the group of `size`
//!   ranks through the rendezvous [`Store`](hvd_core::Store) (already namespaced per job
//!   by the caller); every rank of the group must be on this host. It returns once every
//!   rank has attached, or fails after `config.start_timeout` naming the ranks that never
//!   did.
//! - [`ShmConfig`]: timeouts, the job id in the segment's name, slot size and the
//!   small-tensor crossover; [`ShmConfig::from_env`] reads them from `HVD_*` variables.
//! - Everything else is the [`Collective`](hvd_core::Collective) trait: allreduce (every
//!   op and dtype, prescale and postscale), broadcast, allgather, alltoall,
//!   reducescatter, barrier and split.
//!
//! ## The segment
//! Rank 0 creates `/dev/shm/hvd-shm-<job id>-<random token>` and publishes its name,
//! token and slot size under `shm/segment` in the store; the others attach and check the
//! segment's header (magic, token, rank count, slot size) and length before they use a
//! byte of it, so a leftover or foreign segment is never read: a rank that finds one
//! (or a crashed job's record in the store) waits for rank 0 to publish its own until
//! the start timeout, then fails saying why it refused the last one. A leftover file
//! with the very name rank 0 picks is removed first; rank 0 removes the record once
//! every rank has attached. Every rank unlinks
//! the name once all ranks have attached (or connecting failed), so after that not even a
//! `SIGKILL` leaves anything behind: the memory goes when the last rank unmaps it. The
//! pages are reserved when the segment is created, so a full `/dev/shm` is an error at
//! `connect`, not a `SIGBUS` later.
//!
//! Inside: a header; per rank a control block of its own pair of cache lines (step
//! counter, which is also the futex word peers sleep on, pid, a "left" flag and the
//! description of its last two steps); then per rank two slots of `slot_bytes` (512 KiB).
//!
//! ## Steps
//! Every operation is a sequence of *steps*. In step `k` each rank fills its own slot of
//! parity `k % 2`, publishes `k` in its counter, waits for every counter to reach `k`,
//! and reads any rank's slot of that parity. Slots are double-buffered: a rank writes a
//! slot again two steps later, when every rank has published the step in between and so
//! has finished reading. Each step also publishes what it is (operation, algorithm, root)
//! and a size every rank must agree on; every rank checks every peer's, so ranks that
//! make different calls all get an [`Error::Mismatch`](hvd_core::Error::Mismatch) naming
//! both ranks and values at the same step, and the group goes on working.
//!
//! | call | how |
//! |---|---|
//! | allreduce, runs of tensors of at most `small_bytes` (64 KiB) | one step: copy in, then every rank reduces all slots in rank order, so every rank has the same bits |
//! | allreduce, larger tensors | pipelined chunks of one slot: step `s` copies in chunk `s` (the shares other ranks reduce) and this rank's reduced share of chunk `s - 1`; between steps each rank reduces its 1/n share of the chunk and copies out the others' results. One step per chunk, plus one |
//! | broadcast | the root copies a slot's worth per step, the others copy out |
//! | allgather | every rank copies a slot's worth of its input per step |
//! | alltoall | a first step agrees on the longest block; then each slot is cut into one region per destination |
//! | reducescatter | as alltoall, each rank reducing the pieces of its own block |
//! | barrier | one empty step |
//! | split | members form a new group with a segment of its own, under a namespace of the parent's |
//!
//! Reductions use [`hvd_core::kernels`] (prescale before, average and postscale once at
//! the end). Each element of a large tensor is reduced by exactly one rank, so every rank
//! ends with the same bits on that path too.
//!
//! ## Waiting
//! A rank waiting for a peer polls its counter, then sleeps on it with a futex (the
//! publisher only makes the wake-up call when someone sleeps). When the host has a core
//! per rank it spins for 5 us, then polls until 50 us have passed, yielding the core
//! between polls, so that a peer the scheduler put on the same core (other work keeps
//! the others busy) runs at once. With more ranks than cores it only polls, for 20 us,
//! so oversubscribed groups make progress. `busy_poll` overrides the polling time.
//! Waking from a sleep costs tens of microseconds on a VM, more than a small allreduce
//! takes, hence the polling.
//!
//! ## Faults
//! - A sleeping rank checks every 100 ms whether the ranks behind it left (their
//!   collective was dropped) or their process exited (`kill(pid, 0)`, and zombies count
//!   as exited): [`Error::PeerLost`](hvd_core::Error::PeerLost) naming the rank, within a
//!   fraction of a second. Ranks in another pid namespace cannot be watched this way and
//!   are left to the timeout.
//! - A peer that publishes no step within `op_timeout` (60 s) is an
//!   [`Error::Timeout`](hvd_core::Error::Timeout) naming the rank whose counter is behind
//!   and both step numbers.
//! - The rank that sees a failure first writes it in the segment's abort word and wakes
//!   everyone; the other ranks fail at once with `PeerLost { peer: <culprit>, cause:
//!   "reported by rank X: ..." }`, and the culprit, if it still runs, with
//!   [`Error::Shutdown`](hvd_core::Error::Shutdown) saying which rank gave up on it.
//!   After a failure the group is closed: every later call returns the same error.
//!
//! ## Environment
//! | variable | meaning | default |
//! |---|---|---|
//! | `HVD_START_TIMEOUT` | seconds to form the group | 30 |
//! | `HVD_SHM_TIMEOUT` | seconds a call waits on a peer that makes no progress | 60 |
//! | `HVD_JOB_ID` | job id in the segment's name | empty |
//! | `HVD_SHM_SLOT_BYTES` | bytes of each of a rank's two slots | 512K |
//! | `HVD_SHM_SMALL_BYTES` | crossover from whole copies to split reductions | 64K |

mod allreduce;
mod collective;
mod config;
mod copy;
mod fault;
mod futex;
mod layout;
mod liveness;
mod lockstep;
mod movement;
mod op;
mod plan;
mod provider;
mod reducescatter;
mod rendezvous;
mod segment;

pub use collective::ShmCollective;
pub use config::ShmConfig;
pub use provider::ShmProvider;
