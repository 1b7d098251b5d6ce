//! What transports share beyond the algorithms: the driver that runs
//! [`schedule`](crate::schedule)s for a transport which brings only its event loop, and
//! the plumbing every transport's group needs.
//!
//! - [`Group`]: the state calls on one rank's member of a group share, behind one lock:
//!   the transport's own state, the call sequence, the count of splits, and the failure
//!   that ended the group (every later call returns it);
//! - [`Abort`]: what a failing rank tells the others, in one encoding;
//! - [`blame`]: naming the rank to blame when a call fails or goes silent, the same way
//!   for every transport and the launcher;
//! - [`subgroup_prefix`]: the store namespace of a sub-group, fingerprinted by its
//!   members, and [`check_rank`];
//! - [`Scheduled`]: a complete [`Collective`](crate::Collective) over a [`Transport`]'s
//!   [`Engine`], which runs the algorithm [`choice`](crate::schedule::choice) picks for
//!   each call, lays the tensors out, runs the schedule and poisons the group on the
//!   first failure. TCP and libfabric are
//!   `Scheduled` transports; a new one implements [`Transport`] and [`Engine`] only.

mod abort;
pub mod blame;
mod call;
mod group;
mod scheduled;

use std::fmt;
use std::sync::Arc;

pub use abort::Abort;
pub use call::Call;
pub use group::{Calls, Group, Subgroup, check_rank, fingerprint, subgroup_prefix};
pub use scheduled::Scheduled;

use crate::schedule::{Layout, Schedule, Tuning};
use crate::{Result, Store, Topology};

/// A transport's event loop: it moves the frames of a [`Schedule`] between the ranks.
pub trait Engine: Send + fmt::Debug {
    /// Runs `schedule` over `layout` to completion.
    ///
    /// On failure the engine has already done what its transport does about one (found
    /// the rank to blame, told the other ranks), and returns the error that ends the
    /// group; the driver returns it from every later call.
    fn run(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
    ) -> Result<()>;
}

/// A transport whose groups [`Scheduled`] drives: its settings, and how a rank joins a
/// group with them.
pub trait Transport: Clone + fmt::Debug + Send + Sync + 'static {
    /// The transport's event loop.
    type Engine: Engine;

    /// Short lower-case name (`"tcp"`), as [`Collective::backend`](crate::Collective::backend).
    const BACKEND: &'static str;

    /// The store namespace of a group made by [`Scheduled::connect`]; its sub-groups
    /// live below it.
    const ROOT_PREFIX: &'static str;

    /// Connects `rank` of `size` to the group whose keys live under `prefix` in `store`.
    /// Every rank calls it with the same `size` and `prefix`; it fails after the
    /// transport's start timeout naming the ranks that never appeared. `rank < size`
    /// has been checked.
    fn join(
        &self,
        store: &Arc<dyn Store>,
        prefix: &str,
        rank: usize,
        size: usize,
    ) -> Result<Joined<Self>>;

    /// What the algorithm choice needs to know of this transport: see
    /// [`choice`](crate::schedule::choice), which alone decides.
    fn tuning(&self) -> Tuning;
}

/// A rank's connection to a group, as [`Transport::join`] made it.
#[derive(Debug)]
pub struct Joined<T: Transport> {
    pub topology: Topology,
    pub engine: T::Engine,
    /// The settings the group runs with, which its sub-groups join with: a transport
    /// may settle a choice while joining (libfabric's provider, its message size).
    pub settings: T,
}
