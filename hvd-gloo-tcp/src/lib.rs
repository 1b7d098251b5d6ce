//! # hvd-gloo-tcp: collectives over TCP, the default hvd transport
//!
//! [`TcpCollective`] implements [`hvd_core::Collective`] (backend name `"tcp"`) over plain
//! TCP sockets, in pure Rust: no MPI, no Gloo, no system library. Host memory only.
//!
//! ```no_run
//! use std::sync::Arc;
//! use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, TensorMut};
//! use hvd_gloo_tcp::{TcpCollective, TcpConfig};
//!
//! # fn main() -> hvd_core::Result<()> {
//! let store = Arc::new(MemoryStore::new()); // shared by every rank (threads here)
//! let group = TcpCollective::connect(store, 0, 1, TcpConfig::from_env()?)?;
//! let mut grad = vec![1.0f32; 1024];
//! group.allreduce(&mut [TensorMut::from_slice("grad", &mut grad)], Reduction::new(ReduceOp::Average))?;
//! # Ok(()) }
//! ```
//!
//! ## Forming a group
//! Every rank binds a listener on a port the system picks and publishes, under
//! `tcp/addr/<rank>` in the [`Store`](hvd_core::Store), its host identity, its port and the
//! addresses other hosts may dial. It then connects to every other rank (a full mesh; rank
//! `i` dials the ranks below it), retrying with backoff until `start_timeout`; a rank that
//! never appears is named in the error.
//!
//! - **Addresses.** With `HVD_IFACE` the rank listens on that interface's address only.
//!   Otherwise it listens on all addresses and publishes those of physical-looking
//!   interfaces (never `docker*`, `br-*`, `veth*`, `virbr*`, loopback or link-local).
//!   Loopback is used only when every rank is on one host.
//! - **Hosts.** A host is identified by its hostname plus the sorted set of its
//!   non-loopback addresses, so network namespaces on one machine count as different
//!   hosts. The [`Topology`](hvd_core::Topology) (local and cross ranks) comes from these.
//! - **Sockets.** `TCP_NODELAY` and TCP keepalive. Send and receive buffers are left to
//!   the kernel's autotuning, which grows them up to `net.ipv4.tcp_wmem`/`tcp_rmem`
//!   (4 MiB / 32 MiB by default): fixing them at 4 MiB turns autotuning off and measured
//!   5-15 % slower on loopback.
//!
//! ## Handshake
//! Every connection starts with a handshake: protocol version, job id (`HVD_JOB_ID`) and
//! group, both ranks, the group size, and a mutual challenge-response: each side sends a
//! fresh 32-byte nonce and proves it holds the shared secret (`HVD_SECRET`) with an
//! HMAC-SHA256 over both nonces, the ranks and the group, labelled by role. **When
//! `HVD_SECRET` is unset every rank uses the empty secret**: the handshake then still
//! rejects other protocols, jobs and sizes, but anyone who can reach the ports can join.
//! A caller that fails any check, sends garbage, or says nothing for 5 s is dropped and
//! logged at warn with its address; it never joins, and it does not delay the real ranks
//! (each caller is answered in a thread of its own).
//!
//! ## Algorithms
//! Each call is a schedule of frames run by one `mio` event loop per group on nonblocking
//! sockets, in the calling thread: sends, receives and reductions of all peers progress
//! together, with no thread hand-off per message. Batches travel as one message (or one
//! ring pass): the tensors of a batch are gathered and scattered with `writev`/`readv`
//! straight from and into the caller's memory. Reductions use [`hvd_core::kernels`]
//! (prescale before, average and postscale once at the end), for every dtype and op.
//!
//! Which algorithm runs a call is [`hvd_core::schedule::choice`]'s decision, by operation,
//! rank count and size, for every transport alike; this one tells it `small_bytes`
//! (default 256 KiB, `HVD_TCP_SMALL_BYTES`: below it the number of message latencies
//! matters more than the bytes each rank moves; on 2 cores over loopback recursive
//! doubling wins up to 256-512 KiB at 2 ranks) and that halving pays early here.
//! Pipelined transfers are cut into frames of `chunk_bytes` (512 KiB), each forwarded as
//! soon as it is in; the event
//! loop reads at most 256 KiB per connection before it turns to the others, and offers
//! the kernel the rest of a frame in one send, so that long system calls do not hold up
//! receiving while sending.
//!
//! A waiting call polls its sockets before it sleeps, because waking from a sleep costs
//! tens of microseconds, more than a small message takes: for 1 ms when this host has a
//! core per rank, otherwise for 50 us, yielding the core between polls to the other ranks
//! (`busy_poll`, or `HVD_TCP_BUSY_POLL`, overrides the time). On a host whose cores are
//! busy with other work the balance changes: the scheduler makes a rank that polled long
//! before it slept wait about as long again before it runs once woken, so longer polls
//! cost more, and only a poll that outlasts the wait avoids the cost. Measured on 2 cores
//! with about 10 other busy processes, a 2-rank broadcast of 4 KiB took 2.1 ms with the
//! default 1 ms poll, 0.12 ms with 50 us, and 7 us with `HVD_TCP_BUSY_POLL=1h` (Open MPI,
//! which never sleeps: 7.4 us). `split` connects a sub-group of its own through the
//! same store, under a namespace of the parent's, so calls on a parent and on its
//! sub-groups may run in different threads.
//!
//! ## Frames
//! Every message carries a 24-byte header: magic, kind, operation, the call's sequence
//! number, the frame's number within the call, and the payload length. The receiver knows
//! what it expects and checks all of it before a byte reaches a tensor: garbage is an
//! [`Error::Protocol`](hvd_core::Error::Protocol), a length that differs (ranks passed
//! different sizes) an [`Error::InvalidArgument`](hvd_core::Error::InvalidArgument), both
//! naming the peer, the operation and the tensor. Lengths from the wire never size an
//! allocation beyond what the call itself needs (ABORT causes are capped at 4 KiB).
//!
//! ## Faults
//! A peer that resets or closes its connection fails the call at once with
//! [`Error::PeerLost`](hvd_core::Error::PeerLost) naming it (a close in the middle of a
//! frame, a truncated frame, says how many of its bytes came); a silent one after
//! `op_timeout` (`HVD_TCP_TIMEOUT`, 60 s) with
//! [`Error::PeerSilent`](hvd_core::Error::PeerSilent). Silence spreads (the ranks waiting
//! for a frozen rank stop sending too), so before blaming, a rank that timed out posts
//! whom it waits for in the store and, for half the timeout (at most 2 s), follows the
//! others' posts to the rank at the end of the chain, which posts nothing: every survivor
//! names the frozen rank, not the neighbour that was waiting for it. Ranks that wait for
//! each other in a cycle get an [`Error::Timeout`](hvd_core::Error::Timeout) saying so.
//! The rank that sees a failure first sends an ABORT frame carrying the culprit and the
//! cause on every connection (after finishing any frame it was in the middle of), then
//! shuts them down, so ranks that are not connected to the culprit in the current
//! algorithm fail promptly too, with `PeerLost { peer: <culprit>, cause: "reported by
//! rank X: ..." }`. After a failure the group is poisoned: every later call returns the
//! same error at once.
//!
//! ## Environment
//! | variable | meaning | default |
//! |---|---|---|
//! | `HVD_IFACE` (`HOROVOD_GLOO_IFACE`) | interface to use | automatic |
//! | `HVD_SECRET` | shared secret | empty |
//! | `HVD_JOB_ID` | job id | empty |
//! | `HVD_START_TIMEOUT` | seconds to form the group | 30 |
//! | `HVD_TCP_TIMEOUT` | seconds a call waits on a silent peer | 60 |
//! | `HVD_TCP_SMALL_BYTES` | crossover to the latency-optimal algorithms | 256K |

mod collective;
mod config;
mod fault;
mod frame;
mod handshake;
mod io;
mod mesh;
mod provider;
mod record;
mod silence;
mod socket;

pub use collective::TcpCollective;
pub use config::TcpConfig;
pub use provider::TcpProvider;

#[cfg(test)]
mod wire_faults;

/// Entry points for the fuzz targets in `fuzz/`: what a peer or a stranger can send.
/// Compiled only with `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    /// A frame header, then its bytes after the header as an ABORT payload.
    pub fn frame(bytes: &[u8]) {
        if let Some(header) = bytes.first_chunk::<{ crate::frame::HEADER_LEN }>() {
            let _ = crate::frame::Header::decode(header);
        }
        let _ = crate::frame::read_abort(bytes.get(crate::frame::HEADER_LEN..).unwrap_or(&[]));
    }

    /// The opening HELLO of a connection.
    pub fn handshake(bytes: &[u8]) {
        crate::handshake::read_hello(bytes);
    }
}
