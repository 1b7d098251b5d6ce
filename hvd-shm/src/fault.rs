//! Failures a rank sees while it waits, how it tells the other ranks, and the errors
//! every rank returns for them.

use std::time::Duration;

use hvd_core::Error;

use crate::op::Call;

/// Why a rank gave up on a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Its process is gone.
    Exited = 1,
    /// Its collective was dropped.
    Left = 2,
    /// It did not publish its step within the operation timeout.
    Stuck = 3,
}

impl Reason {
    fn from_code(code: u64) -> Option<Reason> {
        [Reason::Exited, Reason::Left, Reason::Stuck]
            .into_iter()
            .find(|r| *r as u64 == code)
    }

    fn text(self) -> &'static str {
        match self {
            Reason::Exited => "its process exited",
            Reason::Left => "it left the group (its collective was dropped)",
            Reason::Stuck => "it published no step within the operation timeout",
        }
    }
}

/// A failure as stored in the segment's abort word, which every rank checks while it
/// waits: so ranks that were not waiting for the culprit stop too, naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Abort {
    pub(crate) culprit: usize,
    pub(crate) reporter: usize,
    pub(crate) reason: Reason,
}

impl Abort {
    /// Never 0, which means "no failure".
    pub(crate) fn encode(self) -> u64 {
        (self.culprit as u64 + 1) | (self.reporter as u64) << 16 | (self.reason as u64) << 32
    }

    pub(crate) fn decode(word: u64) -> Option<Abort> {
        let culprit = usize::try_from(word & 0xffff).ok()?.checked_sub(1)?;
        Some(Abort {
            culprit,
            reporter: usize::try_from((word >> 16) & 0xffff).ok()?,
            reason: Reason::from_code(word >> 32)?,
        })
    }

    /// The error of a rank that learned of this failure from the abort word; the culprit
    /// itself, if it still runs, learns that the group was closed on it.
    pub(crate) fn reported(self, rank: usize, call: &Call<'_>) -> Error {
        if self.culprit == rank {
            return Error::Shutdown {
                cause: format!(
                    "rank {} gave up on this rank ({rank}) during {} of tensor '{}': {}",
                    self.reporter,
                    call.op.kind().name(),
                    call.tensor,
                    self.reason.text()
                ),
            };
        }
        Error::PeerLost {
            rank,
            peer: self.culprit,
            op: call.op.kind().name(),
            tensor: call.tensor.into(),
            cause: format!("reported by rank {}: {}", self.reporter, self.reason.text()),
        }
    }
}

/// The error of a rank that saw `peer` go itself.
pub(crate) fn lost(rank: usize, peer: usize, pid: u32, reason: Reason, call: &Call<'_>) -> Error {
    let cause = match reason {
        Reason::Exited => format!("its process (pid {pid}) exited"),
        other => other.text().into(),
    };
    Error::PeerLost {
        rank,
        peer,
        op: call.op.kind().name(),
        tensor: call.tensor.into(),
        cause,
    }
}

/// The error of a rank that waited `waited` for `peer` to publish step `want`.
pub(crate) fn stuck(
    rank: usize,
    peer: usize,
    seen: u32,
    want: u32,
    waited: Duration,
    call: &Call<'_>,
) -> Error {
    Error::PeerSilent {
        rank,
        peer,
        op: call.op.kind().name(),
        tensor: call.tensor.into(),
        waited,
        detail: format!("its step counter is behind: at {seen}, this rank waits for {want}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_words_round_trip_and_zero_means_none() {
        let abort = Abort {
            culprit: 0,
            reporter: 255,
            reason: Reason::Stuck,
        };
        assert_ne!(abort.encode(), 0);
        assert_eq!(Abort::decode(abort.encode()), Some(abort));
        assert_eq!(Abort::decode(0), None);
        assert_eq!(Abort::decode(1 | 9 << 32), None);
    }
}
