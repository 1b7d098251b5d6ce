//! The one error type of hvd. Every message names who (rank), what (tensor, operation) and
//! both sides of a disagreement, because the person reading it is debugging a job that
//! spans many machines.

use std::time::Duration;

/// Result with hvd's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a collective, a transport, a store or the runtime.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Ranks disagree about a property of the same tensor.
    #[error(
        "Mismatched {property} for tensor '{tensor}': rank {rank_a} has {value_a}, rank {rank_b} has {value_b}"
    )]
    Mismatch {
        /// What differs, in plural words ("data types", "shapes", "reduce ops", ...).
        property: &'static str,
        tensor: String,
        rank_a: usize,
        value_a: String,
        rank_b: usize,
        value_b: String,
    },

    /// A call was made with arguments that cannot work on this rank.
    #[error("rank {rank}: invalid {op} of tensor '{tensor}': {reason}")]
    InvalidArgument {
        rank: usize,
        op: &'static str,
        tensor: String,
        reason: String,
    },

    /// An operation that cannot run while some ranks of the group have joined (declared
    /// they have no more data): only allreduce can, with zeros from the joined ranks.
    #[error(
        "rank {rank}: {op} of tensor '{tensor}' cannot run while rank {joined} has joined: {reason}"
    )]
    Joined {
        rank: usize,
        op: &'static str,
        tensor: String,
        joined: usize,
        reason: String,
    },

    /// A peer disappeared (closed, reset or died) while this rank needed it. An empty
    /// `tensor` leaves the tensor out (operations on no tensor: barrier, negotiation).
    #[error(
        "rank {rank}: lost rank {peer} during {op}{}: {cause}",
        of_tensor(tensor)
    )]
    PeerLost {
        rank: usize,
        peer: usize,
        op: &'static str,
        tensor: String,
        cause: String,
    },

    /// A wait ran out of time. An empty `tensor` leaves the tensor out.
    #[error(
        "rank {rank}: {op}{} timed out after {waited:?} waiting for {waiting_for}",
        of_tensor(tensor)
    )]
    Timeout {
        rank: usize,
        op: &'static str,
        tensor: String,
        waited: Duration,
        waiting_for: String,
    },

    /// One peer stopped responding: this rank waited for it (directly, or through ranks
    /// that were themselves waiting for it) past the timeout. Frozen, stopped or
    /// overloaded; alive as far as its connections show.
    #[error(
        "rank {rank}: {op}{} timed out after {waited:?} waiting for rank {peer} ({detail})",
        of_tensor(tensor)
    )]
    PeerSilent {
        rank: usize,
        peer: usize,
        op: &'static str,
        tensor: String,
        waited: Duration,
        detail: String,
    },

    /// The device library (the CUDA driver, NCCL) reported that an operation failed on
    /// this rank. An empty `tensor` leaves the tensor out.
    #[error("rank {rank}: {op}{} failed on the device: {cause}", of_tensor(tensor))]
    Device {
        rank: usize,
        op: &'static str,
        tensor: String,
        cause: String,
    },

    /// A peer sent bytes that break the protocol (garbage, truncation, wrong job).
    #[error("rank {rank}: protocol error from {peer}: {reason}")]
    Protocol {
        rank: usize,
        peer: String,
        reason: String,
    },

    /// The transport cannot do this (device, dtype or operation it does not support).
    #[error("{backend} transport does not support {what}")]
    Unsupported { backend: &'static str, what: String },

    /// A configuration value (environment variable, flag or option) is invalid.
    #[error("invalid value {value:?} for {name}: expected {expected}")]
    Config {
        name: String,
        value: String,
        expected: String,
    },

    /// A variable or option that only works with a companion was given without it.
    #[error("{set} is set but {missing} is not: {hint}")]
    Incomplete {
        set: String,
        missing: String,
        hint: String,
    },

    /// Ranks called a collective control operation (`add_process_set`, ...) with
    /// different arguments.
    #[error(
        "Mismatched {property} in {op}: rank {rank_a} has {value_a}, rank {rank_b} has {value_b}"
    )]
    MismatchedCall {
        op: &'static str,
        property: &'static str,
        rank_a: usize,
        value_a: String,
        rank_b: usize,
        value_b: String,
    },

    /// The rendezvous store failed or timed out.
    #[error("store: {0}")]
    Store(String),

    /// A system library a transport needs is missing at run time.
    #[error("{library} is not available: {hint}")]
    LibraryMissing { library: String, hint: String },

    /// An operating-system error, with what we were doing when it happened.
    #[error("{context}: {message}")]
    Io {
        context: String,
        message: String,
        kind: std::io::ErrorKind,
    },

    /// The job is shutting down; `cause` carries the first failure that started it.
    #[error("hvd is shut down: {cause}")]
    Shutdown { cause: String },

    /// The launcher announced new or removed hosts: an elastic job leaves its round at
    /// this commit and meets again with the new set, keeping what it committed.
    #[error(
        "rank {rank}: the hosts changed after round {round} (the launcher announced new or removed hosts); leaving the round at this commit"
    )]
    HostsUpdated { rank: usize, round: u64 },
}

/// " of tensor 'name'", or nothing for an operation on no tensor.
fn of_tensor(tensor: &str) -> String {
    if tensor.is_empty() {
        String::new()
    } else {
        format!(" of tensor '{tensor}'")
    }
}

impl Error {
    /// The rank this error blames for leaving the group (dead, disconnected or silent),
    /// if any: what a launcher needs to tell the cause of a failure from its
    /// consequences.
    pub fn lost_peer(&self) -> Option<usize> {
        match self {
            Error::PeerLost { peer, .. } | Error::PeerSilent { peer, .. } => Some(*peer),
            _ => None,
        }
    }

    /// Whether an elastic job goes on after this error, in a new round without the
    /// lost ranks: a peer lost, silent, timed out or shut down, or hosts that changed.
    /// Anything else (a mismatch between ranks, a bad argument, a configuration) is a
    /// bug that no new round cures, and ends the job.
    pub fn is_recoverable(&self) -> bool {
        matches!(
            self,
            Error::PeerLost { .. }
                | Error::PeerSilent { .. }
                | Error::Timeout { .. }
                | Error::Shutdown { .. }
                | Error::HostsUpdated { .. }
        )
    }

    /// Wraps an I/O error with a description of what was being done.
    pub fn io(context: impl Into<String>, err: &std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            message: err.to_string(),
            kind: err.kind(),
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(
        rank: usize,
        op: &'static str,
        tensor: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Error::InvalidArgument {
            rank,
            op,
            tensor: tensor.into(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_and_silent_peers_are_recoverable_and_bugs_are_not() {
        let lost = Error::PeerLost {
            rank: 0,
            peer: 2,
            op: "allreduce",
            tensor: "grad".into(),
            cause: "connection reset".into(),
        };
        let mismatch = Error::Mismatch {
            property: "shapes",
            tensor: "grad".into(),
            rank_a: 0,
            value_a: "[2]".into(),
            rank_b: 1,
            value_b: "[3]".into(),
        };
        let updated = Error::HostsUpdated { rank: 1, round: 4 };
        assert!(lost.is_recoverable() && updated.is_recoverable());
        assert!(!mismatch.is_recoverable());
        assert!(!Error::invalid(0, "allreduce", "grad", "bad").is_recoverable());
        assert_eq!(
            updated.to_string(),
            "rank 1: the hosts changed after round 4 (the launcher announced new or removed hosts); leaving the round at this commit"
        );
    }
}
