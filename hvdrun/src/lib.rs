//! Starting the ranks of a job.
//!
//! [`Job`] runs N ranks of one command, on this host or on several ([`Host`], started
//! over [`Ssh`]). Each rank gets `HVD_RANK`, `HVD_SIZE`, `HVD_LOCAL_RANK`,
//! `HVD_LOCAL_SIZE`, `HVD_CROSS_RANK`, `HVD_CROSS_SIZE`, `HVD_HOSTNAME` (each also under
//! Horovod's name, `HOROVOD_RANK` ...), the address of the job's
//! rendezvous server (`HVD_STORE_ADDR`) and a fresh secret that authenticates the ranks
//! to it and to each other (`HVD_SECRET`). When one rank fails, the others are stopped and
//! the failure is reported with its rank, host and the last lines of its standard
//! error. The `hvdrun` program is its command line.

pub mod elastic;
mod fabric;
mod hostfile;
mod hosts;
mod interrupt;
mod job;
mod outcome;
mod output;
mod ssh;
mod verdict;

pub use hostfile::{HOSTFILE_VARIABLES, hostfile_named_by, parse_hostfile};
pub use hosts::{Host, Placement, parse_hosts, place};
pub use job::Job;
pub use outcome::{JobOutcome, MissingRank};
pub use output::{Output, TAIL_LINES};
pub use ssh::{SSH_FAILED, Ssh, quote};
