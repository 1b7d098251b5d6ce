//! Which rank is really silent. When a rank freezes, the ranks waiting for it stop
//! sending too, so a rank that times out may be waiting for a healthy neighbour that is
//! itself waiting for the frozen one. Before blaming anyone, a rank that timed out posts
//! whom it waits for in the group's store, then follows the posts of the others for a
//! short grace: the chain ends at the rank that posts nothing, and every survivor names
//! that one.

use std::time::Duration;

use hvd_core::driver::blame::{self, Chain, Look};
use hvd_core::{Error, Store};

use crate::fault::{Call, Fault};

/// How long a rank that timed out waits for the others' posts: the ranks of a stalled
/// group time out within a few milliseconds of each other, and a second or two more
/// on top of the timeout is cheap next to blaming the wrong rank.
pub(crate) fn grace(op_timeout: Duration) -> Duration {
    (op_timeout / 2).min(Duration::from_secs(2))
}

fn waiting_key(prefix: &str, rank: usize) -> String {
    format!("{prefix}/waiting/{rank}")
}

/// The fault to report for a timeout: the same when the culprit is certain, else the
/// rank at the end of the chain of waits, found within `grace`.
pub(crate) fn find_silent(
    store: &dyn Store,
    prefix: &str,
    call: &Call<'_>,
    fault: Fault,
    waited: Duration,
    grace: Duration,
) -> Fault {
    if !fault.suspected {
        return fault;
    }
    let posted = blame::post_rank(store, &waiting_key(prefix, call.rank), fault.culprit);
    if let Err(e) = posted {
        tracing::debug!(
            rank = call.rank,
            "could not post whom this rank waits for: {e}"
        );
        return fault;
    }
    let chain = blame::settle(grace, || {
        let chain = blame::follow(call.rank, call.ranks, |r| match r == call.rank {
            true => Some(fault.culprit),
            false => blame::posted_rank(store, &waiting_key(prefix, r)),
        });
        match chain.is_cycle() {
            true => Look::Decided(chain),
            false => Look::Open(chain),
        }
    });
    blame(call, fault, chain, waited)
}

/// The fault for the chain of waits that starts at this rank.
fn blame(call: &Call<'_>, fault: Fault, chain: Chain, waited: Duration) -> Fault {
    // The ranks between this one and the end, each waiting for the next.
    let via = chain.path.get(1..chain.path.len() - 1).unwrap_or_default();
    match chain.closed_by {
        None if via.is_empty() => fault,
        None => {
            let silent = chain.end();
            let mut steps = vec![format!("rank {} waits for rank {}", call.rank, via[0])];
            for pair in via.windows(2) {
                steps.push(format!("rank {} for rank {}", pair[0], pair[1]));
            }
            steps.push(format!("rank {} for rank {silent}", via[via.len() - 1]));
            let detail = format!(
                "{}, which sent nothing: frozen, stopped or overloaded?",
                steps.join(", ")
            );
            Fault {
                culprit: silent,
                reporter: call.rank,
                cause: format!("silent for {waited:?}"),
                error: Fault::silent_error(call, waited, silent, detail),
                suspected: false,
            }
        }
        Some(closed_by) => {
            let ranks = chain.path.iter().chain([&closed_by]);
            let steps: Vec<String> = ranks.map(|r| format!("rank {r}")).collect();
            Fault {
                error: Error::Timeout {
                    rank: call.rank,
                    op: call.op.name(),
                    tensor: call.tensor.to_owned(),
                    waited,
                    waiting_for: format!(
                        "{} in a cycle ({}): the ranks wait for each other; did they call collectives in different orders?",
                        steps[1],
                        steps.join(" waits for ")
                    ),
                },
                suspected: false,
                ..fault
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hvd_core::{MemoryStore, ReduceOp, Reduction};

    use super::*;
    use hvd_core::OpKind;

    fn call(rank: usize) -> Call<'static> {
        Call {
            rank,
            ranks: 4,
            op: OpKind::Allreduce,
            tensor: "grad",
            seq: 1,
            reduction: Reduction::new(ReduceOp::Sum),
        }
    }

    fn timed_out(rank: usize, waiting_for: usize) -> Fault {
        Fault::timeout(
            &call(rank),
            Duration::from_secs(2),
            &[waiting_for],
            format!("frame 0 from rank {waiting_for} has not arrived"),
        )
    }

    fn find(store: &MemoryStore, rank: usize, waiting_for: usize) -> Fault {
        find_silent(
            store,
            "tcp",
            &call(rank),
            timed_out(rank, waiting_for),
            Duration::from_secs(2),
            Duration::from_millis(60),
        )
    }

    #[test]
    fn a_rank_waiting_for_a_waiting_neighbour_names_the_silent_rank() {
        let store = MemoryStore::new();
        // Rank 0 waits for 2 (frozen); rank 1 waits for 0.
        let direct = find(&store, 0, 2);
        let indirect = find(&store, 1, 0);
        assert_eq!(
            direct.error.to_string(),
            "rank 0: allreduce of tensor 'grad' timed out after 2s waiting for rank 2 (frame 0 from rank 2 has not arrived)"
        );
        assert_eq!(
            indirect.error.to_string(),
            "rank 1: allreduce of tensor 'grad' timed out after 2s waiting for rank 2 (rank 1 waits for rank 0, rank 0 for rank 2, which sent nothing: frozen, stopped or overloaded?)"
        );
        assert_eq!((direct.culprit, indirect.culprit), (2, 2));
        assert_eq!(indirect.error.lost_peer(), Some(2));
    }

    #[test]
    fn long_chains_are_followed_to_their_end() {
        let store = MemoryStore::new();
        store.set("tcp/waiting/2", b"3").unwrap();
        store.set("tcp/waiting/1", b"2").unwrap();
        let fault = find(&store, 0, 1);
        assert_eq!(fault.culprit, 3);
        assert!(
            fault
                .error
                .to_string()
                .ends_with("(rank 0 waits for rank 1, rank 1 for rank 2, rank 2 for rank 3, which sent nothing: frozen, stopped or overloaded?)"),
            "{}",
            fault.error
        );
    }

    #[test]
    fn ranks_waiting_for_each_other_are_a_cycle_not_a_culprit() {
        let store = MemoryStore::new();
        store.set("tcp/waiting/1", b"0").unwrap();
        let fault = find(&store, 0, 1);
        assert_eq!(
            fault.error.to_string(),
            "rank 0: allreduce of tensor 'grad' timed out after 2s waiting for rank 1 in a cycle (rank 0 waits for rank 1 waits for rank 0): the ranks wait for each other; did they call collectives in different orders?"
        );
        assert_eq!(fault.error.lost_peer(), None);
    }

    #[test]
    fn garbage_in_the_store_ends_the_chain() {
        let store = MemoryStore::new();
        store.set("tcp/waiting/2", b"not a rank").unwrap();
        store.set("tcp/waiting/3", b"99").unwrap();
        assert_eq!(find(&store, 0, 2).culprit, 2);
        assert_eq!(find(&store, 1, 3).culprit, 3);
    }
}
