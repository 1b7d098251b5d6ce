//! # hvd-hierarchical: allreduce within hosts, then across them
//!
//! [`Hierarchical`] is middleware in the style of Fusion and Timeline: it *is* a
//! [`Collective`](hvd_core::Collective) and wraps two. `L` connects the ranks of one
//! host (shared memory); `C` connects every rank of the job (TCP, RDMA). Horovod's
//! hierarchical allreduce (`HOROVOD_HIERARCHICAL_ALLREDUCE`) is the reason: a host's
//! ranks share memory bandwidth that is worth far more than its network link, so the
//! network should carry each byte once per host, not once per rank.
//!
//! - **Every host has the same number of ranks** (the usual one rank per GPU): the
//!   tensor is reduce-scattered within the host, each rank allreduces its shard with the
//!   ranks of the same local rank on the other hosts (a cross group, split from `C`), and
//!   the shards are allgathered within the host. Each cross group carries 1/local_size of
//!   the tensor, and the cross groups run side by side.
//! - **Hosts have different numbers of ranks**: allreduce within the host, allreduce
//!   among the hosts' first ranks, broadcast within the host.
//!
//! Prescale is applied once, to each rank's contribution; `Average`'s division (by the
//! job's size) and postscale once, to the result. Every rank ends with the same bits:
//! each element is reduced on one rank and then copied. Other operations run on `C`
//! unchanged; errors from the inner groups name the job's ranks.
//!
//! ```no_run
//! # fn main() -> hvd_core::Result<()> {
//! # fn flat() -> Box<dyn hvd_core::Collective> { unimplemented!() }
//! # fn this_host() -> Box<dyn hvd_core::Collective> { unimplemented!() }
//! // flat: every rank of the job; this_host: the ranks of this host, in job-rank order.
//! let group = hvd_hierarchical::Hierarchical::new(flat(), this_host())?;
//! # let _ = group;
//! # Ok(()) }
//! ```

mod collective;
mod plan;
mod ranks;

pub use collective::Hierarchical;
