//! # hvd-rendezvous: the key-value [`Store`](hvd_core::Store) through which the ranks of a
//! job find each other and report to their launcher
//!
//! [`StoreServer`] serves a store over TCP; [`TcpStore`] is a rank's client. hvdrun runs the
//! server and hands each rank its address (`HVD_STORE_ADDR`) and the job's secret
//! (`HVD_SECRET`). Under torchrun-style launchers rank 0 serves it on `MASTER_PORT`
//! and every rank connects to `MASTER_ADDR:MASTER_PORT`.
//!
//! Every request is authenticated with an HMAC-SHA256 under the job secret, bound to a
//! per-connection nonce and a sequence number; the server refuses, and logs, any request
//! without a valid one. The TCP transport's handshake uses the same secret.

mod client;
pub mod elastic;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod keys;
mod select;
mod server;
mod slurm;
mod wire;

pub use client::TcpStore;
pub use keys::{CHECKIN_KEY, checkin_key, lost_by, lost_key};
pub use select::{STORE_ADDR_VAR, launcher_store, store_from_env};
pub use server::StoreServer;

#[cfg(test)]
mod tests;
