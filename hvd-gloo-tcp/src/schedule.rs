//! What an algorithm tells the I/O engine: which frames to send to and expect from each
//! peer, in what order, and what to do with each payload.
//!
//! Algorithms are plain state machines over byte ranges of a [`Layout`]; the engine does
//! all the I/O, waiting, timeouts and error naming, so each algorithm is only its logic.

use std::io;
use std::ops::Range;

use crate::layout::Layout;

/// What the engine does with a received payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
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
pub(crate) struct Recv {
    pub range: Range<usize>,
    pub action: Action,
}

impl Recv {
    pub(crate) fn new(range: Range<usize>, action: Action) -> Self {
        Recv { range, action }
    }
}

/// A frame transfer that finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Every byte of the frame is in the kernel's send buffer.
    Sent(usize),
    /// Every byte of the frame arrived and its action ran.
    Received(usize),
}

/// What a schedule may touch when a transfer finishes.
#[derive(Debug)]
pub(crate) struct Data<'d, 'a> {
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
pub(crate) trait Schedule {
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
