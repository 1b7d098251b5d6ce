//! Errors from the inner groups name ranks of those groups (a host's local ranks, a
//! cross group's hosts); the person reading them knows the job's ranks.

use hvd_core::Error;

/// `err` from a group whose rank `i` is the job's rank `members[i]`, with its ranks
/// turned into the job's.
pub(crate) fn in_job(err: Error, members: &[usize]) -> Error {
    let job = |r: usize| members.get(r).copied().unwrap_or(r);
    match err {
        Error::PeerLost {
            rank,
            peer,
            op,
            tensor,
            cause,
        } => Error::PeerLost {
            rank: job(rank),
            peer: job(peer),
            op,
            tensor,
            cause,
        },
        Error::PeerSilent {
            rank,
            peer,
            op,
            tensor,
            waited,
            detail,
        } => Error::PeerSilent {
            rank: job(rank),
            peer: job(peer),
            op,
            tensor,
            waited,
            detail,
        },
        Error::Mismatch {
            property,
            tensor,
            rank_a,
            value_a,
            rank_b,
            value_b,
        } => Error::Mismatch {
            property,
            tensor,
            rank_a: job(rank_a),
            value_a,
            rank_b: job(rank_b),
            value_b,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_local_rank_is_named_by_its_job_rank() {
        let err = Error::PeerLost {
            rank: 0,
            peer: 1,
            op: "reducescatter",
            tensor: "grad".into(),
            cause: "its process is gone".into(),
        };
        assert_eq!(
            in_job(err, &[4, 6]).to_string(),
            "rank 4: lost rank 6 during reducescatter of tensor 'grad': its process is gone"
        );
        assert_eq!(
            in_job(Error::Store("x".into()), &[4, 6]).to_string(),
            "store: x"
        );
    }
}
