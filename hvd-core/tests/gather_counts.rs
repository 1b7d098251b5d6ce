//! Counts from other ranks are checked before anything is sized by them.

use hvd_core::reference::LocalGroup;
use hvd_core::{allgather_bytes, gather_counts};

/// Runs `body` on every rank of a thread job; returns each rank's result as text.
fn each_rank(
    n: usize,
    body: impl Fn(usize, &dyn hvd_core::Collective) -> String + Sync,
) -> Vec<String> {
    let group = LocalGroup::new(n).build();
    std::thread::scope(|s| {
        let handles: Vec<_> = group
            .into_iter()
            .enumerate()
            .map(|(rank, c)| {
                let body = &body;
                s.spawn(move || body(rank, &c))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn a_negative_count_is_a_protocol_error_naming_the_sender() {
    // usize::MAX travels as -1: what a peer speaking another protocol might send.
    let results = each_rank(2, |rank, c| {
        let local = if rank == 1 { usize::MAX } else { 3 };
        match gather_counts(c, local) {
            Ok(counts) => format!("{counts:?}"),
            Err(e) => e.to_string(),
        }
    });
    assert_eq!(
        results[0],
        "rank 0: protocol error from rank 1: a count of -1"
    );
}

#[test]
fn counts_whose_total_overflows_are_refused() {
    let results = each_rank(3, |_, c| match gather_counts(c, i64::MAX as usize) {
        Ok(counts) => format!("{counts:?}"),
        Err(e) => e.to_string(),
    });
    let max = i64::MAX;
    assert_eq!(
        results[0],
        format!(
            "rank 0: protocol error from the group: counts [{max}, {max}, {max}] whose total overflows"
        )
    );
}

#[test]
fn byte_strings_of_every_rank_come_back_in_rank_order() {
    let results = each_rank(3, |rank, c| {
        let mine = vec![b'a' + rank as u8; rank];
        format!("{:?}", allgather_bytes(c, "t", &mine).unwrap())
    });
    assert!(
        results.iter().all(|r| r == "[[], [98], [99, 99]]"),
        "{results:?}"
    );
}
