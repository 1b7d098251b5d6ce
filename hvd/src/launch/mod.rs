//! Starting the ranks of a job.
//!
//! [`LocalJob`] runs N ranks of one command on this host: each gets `HVD_RANK`,
//! `HVD_SIZE`, `HVD_LOCAL_RANK`, `HVD_LOCAL_SIZE`, a shared `HVD_STORE_DIR` for rendezvous
//! and a fresh `HVD_SECRET` that authenticates the ranks to each other. When one rank
//! fails, the others are stopped and the failure is reported with its rank and the last
//! lines of its standard error. The `hvdrun` program is its command line.

mod interrupt;
mod local;
mod output;

pub use local::{CHECKIN_KEY, JobOutcome, LocalJob, MissingRank, checkin_key};
pub use output::{Output, TAIL_LINES};
