//! What an algorithm tells the I/O engine: which frames to send to and expect from each
//! peer, in what order, and what to do with each payload.
//!
//! Algorithms are plain state machines over byte ranges of a [`Layout`]; the engine does
//! all the I/O, waiting, timeouts and error naming, so each algorithm is only its logic.
//! They live here, below every transport, so that transports with different I/O (TCP
//! sockets, libfabric endpoints) run the same ring, recursive-doubling, halving-doubling,
//! tree and pairwise schedules without depending on each other.
//!
//! An engine drives a schedule like this: for every peer of [`Schedule::peers`], it asks
//! [`Schedule::next_send`] and [`Schedule::next_recv`] for frames, moves them, and reports
//! each finished one with [`Schedule::complete`], in release order per peer and direction,
//! applying the receive's [`Action`] first; the call is over when [`Schedule::is_done`].
//! The `n`-th frame a rank sends to a peer is the `n`-th frame that peer expects from it.

pub mod barrier;
pub mod broadcast;
pub mod choice;
pub mod exchange;
pub mod halving;
mod layout;
mod phases;
pub mod recursive;
mod ring;
#[cfg(test)]
mod simulate;

use std::io;
use std::ops::Range;

pub use choice::{Algorithm, Tuning, choose};
pub use layout::{Layout, MAX_IOV, blocks};
pub use phases::{Phase, Phases, Then};
pub use ring::Ring;

/// What the engine does with a received payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Writes it over the range.
    Place,
    /// Combines it into the range with the call's reduce op, as it arrives.
    Reduce,
    /// Combines it, then finishes the reduction there (average, postscale): the last
    /// contribution to that range.
    ReduceFinish,
    /// Keeps it whole in the peer's stash, for the schedule to use when it completes.
    Stash,
}

/// A frame to expect from a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recv {
    pub range: Range<usize>,
    pub action: Action,
}

impl Recv {
    pub fn new(range: Range<usize>, action: Action) -> Self {
        Recv { range, action }
    }
}

/// A frame transfer that finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// Every byte of the frame is in the kernel's send buffer.
    Sent(usize),
    /// Every byte of the frame arrived and its action ran.
    Received(usize),
}

/// What a schedule may touch when a transfer finishes.
#[derive(Debug)]
pub struct Data<'d, 'a> {
    pub layout: &'d mut Layout<'a>,
    /// The last stashed payload of each peer, by rank.
    pub stashes: &'d [Vec<u8>],
}

/// One rank's part of one collective call.
///
/// The engine asks for the next frame of a peer whenever that peer's previous frame in
/// the same direction has finished, and calls [`Schedule::complete`] after each finished
/// frame, after which it asks again: a schedule releases a frame only once its data is
/// ready. Frames to one peer go out in the order they are released.
pub trait Schedule {
    /// Every peer this call exchanges frames with.
    fn peers(&self) -> Vec<usize>;

    /// The next frame to send to `peer`, if its data is ready.
    fn next_send(&mut self, peer: usize) -> Option<Range<usize>>;

    /// The next frame to expect from `peer`, if this rank is ready to receive it.
    fn next_recv(&mut self, peer: usize) -> Option<Recv>;

    /// Called when a frame has been sent or received.
    fn complete(&mut self, done: Done, data: &mut Data<'_, '_>) -> io::Result<()>;

    /// True once every frame of the call has been sent and received.
    fn is_done(&self) -> bool;
}
