//! [`Abort`]: what a failing rank tells the others.

use super::Call;
use crate::Error;

/// What a rank whose call failed tells the other ranks, so that ranks waiting on someone
/// else than the culprit fail at once naming it, instead of timing out on a healthy
/// neighbour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abort {
    /// The rank to blame: the dead or misbehaving one.
    pub culprit: usize,
    /// The rank that saw it happen.
    pub reporter: usize,
    /// What was seen, in words other ranks can repeat.
    pub cause: String,
}

impl Abort {
    /// The bytes that carry it: culprit and reporter as little-endian `u32`s, then the
    /// cause, cut at a character boundary to at most `max_cause` bytes.
    pub fn encode(&self, max_cause: usize) -> Vec<u8> {
        let mut end = self.cause.len().min(max_cause);
        while !self.cause.is_char_boundary(end) {
            end -= 1;
        }
        let mut out = Vec::with_capacity(8 + end);
        out.extend_from_slice(&(self.culprit as u32).to_le_bytes());
        out.extend_from_slice(&(self.reporter as u32).to_le_bytes());
        out.extend_from_slice(&self.cause.as_bytes()[..end]);
        out
    }

    /// The error of a rank that hears this abort during `call`: it lost the culprit, in
    /// the reporter's words.
    pub fn error(&self, call: &Call<'_>) -> Error {
        Error::PeerLost {
            rank: call.rank,
            peer: self.culprit,
            op: call.op.name(),
            tensor: call.tensor.to_owned(),
            cause: format!("reported by rank {}: {}", self.reporter, self.cause),
        }
    }

    /// Reads what [`encode`](Self::encode) wrote; `None` when the bytes are too short to
    /// name two ranks. A cause that is not UTF-8 is read lossily: it is only repeated.
    pub fn decode(bytes: &[u8]) -> Option<Abort> {
        let word = |at: usize| -> Option<usize> {
            let quad: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
            Some(u32::from_le_bytes(quad) as usize)
        };
        Some(Abort {
            culprit: word(0)?,
            reporter: word(4)?,
            cause: String::from_utf8_lossy(bytes.get(8..)?).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aborts_round_trip_and_long_causes_are_cut_between_characters() {
        let abort = Abort {
            culprit: 2,
            reporter: 65535,
            cause: "connection reset".into(),
        };
        assert_eq!(Abort::decode(&abort.encode(1024)), Some(abort));
        let long = Abort {
            culprit: 1,
            reporter: 0,
            cause: "é".repeat(10),
        };
        let cut = Abort::decode(&long.encode(5)).unwrap();
        assert_eq!(cut.cause, "éé");
        assert_eq!(Abort::decode(&[1, 0, 0, 0, 2, 0, 0]), None);
    }

    #[test]
    fn a_rank_that_hears_an_abort_lost_the_culprit_as_the_reporter_saw() {
        let abort = Abort {
            culprit: 2,
            reporter: 1,
            cause: "connection reset".into(),
        };
        let call = Call {
            rank: 0,
            ranks: 3,
            op: crate::OpKind::Allreduce,
            tensor: "grad",
            seq: 1,
            reduction: crate::Reduction::new(crate::ReduceOp::Sum),
        };
        let error = abort.error(&call);
        assert_eq!(
            error.to_string(),
            "rank 0: lost rank 2 during allreduce of tensor 'grad': reported by rank 1: connection reset"
        );
        assert_eq!(error.lost_peer(), Some(2));
    }
}
