//! Errors of the control path speak the user's language. Negotiation runs collectives
//! on internal tensors (`hvd.negotiate`, `hvd.announce`, `hvd.counts`); a failure there
//! reads "during negotiation" and names the user's own tensors that were waiting.

use hvd_core::Error;

/// Whether `tensor` is one of the runtime's own.
fn internal(tensor: &str) -> bool {
    tensor.starts_with("hvd.")
}

/// The most pending tensors an error lists by name.
const LISTED: usize = 5;

/// A pending name as the user knows it: their tensor's, quoted, or the operation that
/// made an internal one (`hvd.barrier.3` is a barrier).
fn shown(name: &str) -> String {
    match name.strip_prefix("hvd.") {
        Some(internal) => internal.split('.').next().unwrap_or(internal).to_string(),
        None => format!("'{name}'"),
    }
}

/// `pending`, the first few by name: "'grad.w1', 'grad.b1', and 3 more".
fn listed(pending: &[String]) -> String {
    let mut names: Vec<String> = pending.iter().take(LISTED).map(|n| shown(n)).collect();
    if pending.len() > LISTED {
        names.push(format!("and {} more", pending.len() - LISTED));
    }
    names.join(", ")
}

fn with_pending(what: String, pending: &[String]) -> String {
    if pending.is_empty() {
        format!("{what}; no tensor of this rank was waiting")
    } else {
        format!("{what}; this rank's waiting tensors: {}", listed(pending))
    }
}

/// `err` as the user should read it, when it came from negotiation; `pending` are the
/// names of this rank's tensors still waiting, oldest first.
pub(super) fn while_negotiating(err: Error, pending: &[String]) -> Error {
    const OP: &str = "negotiation";
    match err {
        Error::Timeout {
            rank,
            tensor,
            waited,
            waiting_for,
            ..
        } if internal(&tensor) => Error::Timeout {
            rank,
            op: OP,
            tensor: String::new(),
            waited,
            waiting_for: with_pending(waiting_for, pending),
        },
        Error::PeerSilent {
            rank,
            peer,
            tensor,
            waited,
            detail,
            ..
        } if internal(&tensor) => Error::PeerSilent {
            rank,
            peer,
            op: OP,
            tensor: String::new(),
            waited,
            detail: with_pending(detail, pending),
        },
        Error::PeerLost {
            rank,
            peer,
            tensor,
            cause,
            ..
        } if internal(&tensor) => Error::PeerLost {
            rank,
            peer,
            op: OP,
            tensor: String::new(),
            cause: with_pending(cause, pending),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("grad.{i}")).collect()
    }

    #[test]
    fn internal_tensors_become_negotiation_with_the_users_tensors() {
        let silent = Error::PeerSilent {
            rank: 0,
            peer: 2,
            op: "allreduce",
            tensor: "hvd.negotiate".into(),
            waited: Duration::from_secs(2),
            detail: "frame 0 from rank 2 has not arrived".into(),
        };
        assert_eq!(
            while_negotiating(silent, &names(2)).to_string(),
            "rank 0: negotiation timed out after 2s waiting for rank 2 (frame 0 from rank 2 has not arrived; this rank's waiting tensors: 'grad.0', 'grad.1')"
        );
        let lost = Error::PeerLost {
            rank: 1,
            peer: 2,
            op: "allgather",
            tensor: "hvd.announce".into(),
            cause: "it closed the connection".into(),
        };
        assert_eq!(
            while_negotiating(lost, &names(7)).to_string(),
            "rank 1: lost rank 2 during negotiation: it closed the connection; this rank's waiting tensors: 'grad.0', 'grad.1', 'grad.2', 'grad.3', 'grad.4', and 2 more"
        );
        let timeout = Error::Timeout {
            rank: 0,
            op: "allreduce",
            tensor: "hvd.negotiate".into(),
            waited: Duration::from_secs(2),
            waiting_for: "rank 1, rank 2 (...)".into(),
        };
        assert_eq!(
            while_negotiating(timeout.clone(), &[]).to_string(),
            "rank 0: negotiation timed out after 2s waiting for rank 1, rank 2 (...); no tensor of this rank was waiting"
        );
        let control = ["hvd.barrier.3".to_string(), "x".into()];
        assert_eq!(
            while_negotiating(timeout, &control).to_string(),
            "rank 0: negotiation timed out after 2s waiting for rank 1, rank 2 (...); this rank's waiting tensors: barrier, 'x'"
        );
    }

    #[test]
    fn errors_about_user_tensors_are_left_alone() {
        let lost = Error::PeerLost {
            rank: 1,
            peer: 2,
            op: "allreduce",
            tensor: "grad.w1".into(),
            cause: "it closed the connection".into(),
        };
        assert_eq!(
            while_negotiating(lost.clone(), &names(1)).to_string(),
            lost.to_string()
        );
    }
}
