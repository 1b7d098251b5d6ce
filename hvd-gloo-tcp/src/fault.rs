//! Failures of a call in flight: the error this rank returns, plus what it tells the
//! other ranks in its ABORT frames (who failed, who saw it, and what was seen).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use hvd_core::Error;

pub(crate) use hvd_core::driver::Call;

use crate::frame::{Abort, Unexpected};

/// A failure that ends the call and poisons the group.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    /// The rank whose failure this is: the dead or misbehaving peer.
    pub culprit: usize,
    /// The rank that saw it happen.
    pub reporter: usize,
    /// What was seen, in words other ranks can repeat.
    pub cause: String,
    pub error: Error,
    /// The culprit is only suspected: it was silent, and may itself be waiting for
    /// another rank (see [`crate::silence`]).
    pub suspected: bool,
}

impl Fault {
    /// `peer` closed, reset or broke its connection.
    pub(crate) fn lost(call: &Call<'_>, peer: usize, cause: String) -> Fault {
        Fault {
            culprit: peer,
            reporter: call.rank,
            error: Error::PeerLost {
                rank: call.rank,
                peer,
                op: call.op.name(),
                tensor: call.tensor.to_owned(),
                cause: cause.clone(),
            },
            cause,
            suspected: false,
        }
    }

    /// An I/O error on the connection to `peer`.
    pub(crate) fn io(call: &Call<'_>, peer: usize, err: &io::Error) -> Fault {
        let cause = match err.kind() {
            io::ErrorKind::ConnectionReset => {
                "connection reset (the process died or closed it)".into()
            }
            io::ErrorKind::BrokenPipe => "connection broken (the process died or closed it)".into(),
            _ => err.to_string(),
        };
        Fault::lost(call, peer, cause)
    }

    /// Another rank's ABORT frame, received from `from`.
    pub(crate) fn reported(call: &Call<'_>, abort: Abort) -> Fault {
        Fault {
            culprit: abort.culprit,
            reporter: abort.reporter,
            error: abort.error(call),
            cause: abort.cause,
            suspected: false,
        }
    }

    /// `peer` sent a frame this rank did not expect.
    pub(crate) fn unexpected(
        call: &Call<'_>,
        peer: usize,
        addr: SocketAddr,
        what: Unexpected,
    ) -> Fault {
        let error = match &what {
            Unexpected::Length { .. } => Error::invalid(
                call.rank,
                call.op.name(),
                call.tensor,
                format!("rank {peer} sent {what}"),
            ),
            Unexpected::Garbage(_) | Unexpected::OutOfStep(_) => Error::Protocol {
                rank: call.rank,
                peer: format!("rank {peer} ({addr})"),
                reason: format!(
                    "{what}, during {} of tensor '{}'",
                    call.op.name(),
                    call.tensor
                ),
            },
        };
        Fault {
            culprit: peer,
            reporter: call.rank,
            cause: format!("rank {peer} sent {what}"),
            error,
            suspected: false,
        }
    }

    /// Nothing moved for `waited` while this rank waited for `peers`.
    pub(crate) fn timeout(
        call: &Call<'_>,
        waited: Duration,
        peers: &[usize],
        detail: String,
    ) -> Fault {
        let culprit = peers.first().copied().unwrap_or(call.rank);
        let error = match peers {
            [peer] => Fault::silent_error(call, waited, *peer, detail),
            _ => {
                let names: Vec<String> = peers.iter().map(|p| format!("rank {p}")).collect();
                Error::Timeout {
                    rank: call.rank,
                    op: call.op.name(),
                    tensor: call.tensor.to_owned(),
                    waited,
                    waiting_for: format!("{} ({detail})", names.join(", ")),
                }
            }
        };
        Fault {
            culprit,
            reporter: call.rank,
            cause: format!("silent for {waited:?}"),
            error,
            suspected: true,
        }
    }

    /// The error for one peer that stayed silent for `waited`.
    pub(crate) fn silent_error(
        call: &Call<'_>,
        waited: Duration,
        peer: usize,
        detail: String,
    ) -> Error {
        Error::PeerSilent {
            rank: call.rank,
            peer,
            op: call.op.name(),
            tensor: call.tensor.to_owned(),
            waited,
            detail,
        }
    }

    /// A failure on this rank itself (its poll or its own memory).
    pub(crate) fn local(call: &Call<'_>, err: &io::Error) -> Fault {
        Fault {
            culprit: call.rank,
            reporter: call.rank,
            cause: err.to_string(),
            suspected: false,
            error: Error::io(
                format!(
                    "rank {}: {} of tensor '{}'",
                    call.rank,
                    call.op.name(),
                    call.tensor
                ),
                err,
            ),
        }
    }

    /// The ABORT frame payload that tells other ranks about this failure.
    pub(crate) fn abort(&self) -> Abort {
        Abort {
            culprit: self.culprit,
            reporter: self.reporter,
            cause: self.cause.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use hvd_core::{OpKind, ReduceOp, Reduction};

    use super::*;

    fn call() -> Call<'static> {
        Call {
            rank: 0,
            ranks: 4,
            op: OpKind::Allreduce,
            tensor: "big",
            seq: 3,
            reduction: Reduction::new(ReduceOp::Sum),
        }
    }

    #[test]
    fn a_report_names_the_dead_rank_and_the_reporter() {
        let lost = Fault::io(&call(), 2, &io::Error::from(io::ErrorKind::ConnectionReset));
        let mut seen_by_1 = lost.abort();
        seen_by_1.reporter = 1;
        let reported = Fault::reported(&call(), seen_by_1);
        assert_eq!(
            reported.error.to_string(),
            "rank 0: lost rank 2 during allreduce of tensor 'big': reported by rank 1: connection reset (the process died or closed it)"
        );
        assert_eq!((reported.culprit, reported.reporter), (2, 1));
    }

    #[test]
    fn a_length_mismatch_is_an_invalid_argument_naming_the_peer() {
        let addr = "127.0.0.1:9".parse().unwrap();
        let fault = Fault::unexpected(
            &call(),
            3,
            addr,
            Unexpected::Length {
                theirs: 8,
                ours: 16,
            },
        );
        assert_eq!(
            fault.error.to_string(),
            "rank 0: invalid allreduce of tensor 'big': rank 3 sent a frame of 8 bytes where this rank expects 16 (the ranks passed tensors of different sizes or counts)"
        );
    }

    #[test]
    fn a_timeout_names_the_silent_peers() {
        let fault = Fault::timeout(
            &call(),
            Duration::from_secs(60),
            &[1, 3],
            "frames not received".into(),
        );
        assert_eq!(
            fault.error.to_string(),
            "rank 0: allreduce of tensor 'big' timed out after 60s waiting for rank 1, rank 3 (frames not received)"
        );
        assert_eq!(fault.culprit, 1);
    }
}
