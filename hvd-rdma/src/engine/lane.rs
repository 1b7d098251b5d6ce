//! The frames of a call in flight to and from each peer, and the tags that match them.

use std::collections::VecDeque;
use std::ops::Range;

use hvd_core::schedule::Recv;

/// The tag of frame `frame` from `from` in call `seq`: both sides count frames per peer
/// and direction, so the `n`-th send meets the `n`-th receive. The sender's rank is in
/// the tag because receives accept any source. The top bit is left for aborts.
pub(super) fn tag(seq: u32, from: usize, frame: u32) -> u64 {
    (u64::from(seq & 0x7fff) << 48) | (((from & 0xffff) as u64) << 32) | u64::from(frame)
}

/// Tags with this bit carry an [`Abort`](hvd_core::driver::Abort); one receive for them is always posted.
pub(super) const ABORT_TAG: u64 = 1 << 63;

#[derive(Debug)]
pub(super) struct InFlight {
    pub slot: usize,
    /// The layout bytes a send reads in place until it completes (none when staged):
    /// nothing may write them meanwhile.
    pub reads: Option<Range<usize>>,
    /// Whether a receive lands in place, in the tensors, rather than in its slot.
    pub in_place: bool,
    /// What to do with a received frame (`None` for sends).
    pub recv: Option<Recv>,
    /// Set when the operation completed: the bytes that arrived.
    pub done: Option<usize>,
}

/// The frames of a call to and from one peer.
#[derive(Debug, Default)]
pub(super) struct Lane {
    pub sends: VecDeque<InFlight>,
    pub recvs: VecDeque<InFlight>,
    pub sent: u32,
    pub received: u32,
}
