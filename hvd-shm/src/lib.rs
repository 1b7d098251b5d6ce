//! # hvd-shm: collectives through shared memory, for the ranks of one host
//!
//! (Crate documentation follows below.)

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
mod reducescatter;
mod rendezvous;
mod segment;

pub use collective::ShmCollective;
pub use config::ShmConfig;
