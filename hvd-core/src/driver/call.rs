//! [`Call`]: which call of a group a frame or a failure belongs to.

use crate::{OpKind, Reduction};

/// One call on a group, as an engine sees it: for its frames (the sequence number tells
/// calls apart) and for its errors (the rank, the operation and the tensor).
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// This rank.
    pub rank: usize,
    /// The size of the group.
    pub ranks: usize,
    pub op: OpKind,
    /// The tensor, or the batch's name (see [`batch_name`](crate::batch_name)).
    pub tensor: &'a str,
    /// Number of the call on this group, the same on every rank.
    pub seq: u32,
    /// The reduction that reduce actions apply (`Sum` for calls that do not reduce).
    pub reduction: Reduction,
}
