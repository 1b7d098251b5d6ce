//! Negotiation: ranks submit in any order, disagreements fail on every rank with one
//! message, duplicate names are refused at once, and repeated tensors skip the
//! announcement round.

mod common;

use common::{config, job};
use hvd::{Hvd, ReduceOp, Reduction, Shaped};

#[test]
fn ranks_may_submit_in_opposite_orders() {
    let results = job(2, config(), |hvd| {
        let mut names = ["a", "b", "c"];
        if hvd.rank() == 1 {
            names.reverse();
        }
        let handles: Vec<_> = names
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    hvd.allreduce_async(n, vec![n.len() as i32 + hvd.rank() as i32], ReduceOp::Sum)
                        .unwrap(),
                )
            })
            .collect();
        let mut out: Vec<(String, Vec<i32>)> = handles
            .into_iter()
            .map(|(n, h)| (n, h.wait().unwrap()))
            .collect();
        out.sort();
        out
    });
    for out in results {
        assert_eq!(
            out,
            [
                ("a".into(), vec![3]),
                ("b".into(), vec![3]),
                ("c".into(), vec![3])
            ]
        );
    }
}

/// Rank 0 submits `mine`, rank 1 `theirs`, both under the name 'grad.w1'; returns each
/// rank's error text.
fn mismatch(mine: fn(&Hvd) -> String, theirs: fn(&Hvd) -> String) -> Vec<String> {
    job(2, config(), |hvd| {
        if hvd.rank() == 0 {
            mine(&hvd)
        } else {
            theirs(&hvd)
        }
    })
}

fn err<T: std::fmt::Debug>(r: hvd::Result<T>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn mismatched_dtypes_fail_on_every_rank_with_one_message() {
    let errors = mismatch(
        |h| err(h.allreduce("grad.w1", vec![1.0f32], ReduceOp::Sum)),
        |h| err(h.allreduce("grad.w1", vec![1.0f64], ReduceOp::Sum)),
    );
    assert_eq!(
        errors,
        ["Mismatched data types for tensor 'grad.w1': rank 0 has f32, rank 1 has f64"; 2]
    );
}

#[test]
fn mismatched_shapes_ops_and_factors_are_named() {
    let shapes = mismatch(
        |h| {
            err(h.allreduce(
                "grad.w1",
                Shaped::new(vec![0i32; 6], vec![2, 3]).unwrap(),
                ReduceOp::Sum,
            ))
        },
        |h| {
            err(h.allreduce(
                "grad.w1",
                Shaped::new(vec![0i32; 6], vec![3, 2]).unwrap(),
                ReduceOp::Sum,
            ))
        },
    );
    assert_eq!(
        shapes,
        ["Mismatched shapes for tensor 'grad.w1': rank 0 has [2, 3], rank 1 has [3, 2]"; 2]
    );
    let ops = mismatch(
        |h| err(h.allreduce("grad.w1", vec![0u8], ReduceOp::Sum)),
        |h| err(h.broadcast("grad.w1", vec![0u8], 0)),
    );
    assert_eq!(
        ops,
        ["Mismatched operations for tensor 'grad.w1': rank 0 has allreduce, rank 1 has broadcast";
            2]
    );
    let reduce_ops = mismatch(
        |h| err(h.allreduce("grad.w1", vec![0u8], ReduceOp::Sum)),
        |h| err(h.allreduce("grad.w1", vec![0u8], ReduceOp::Max)),
    );
    assert_eq!(
        reduce_ops,
        ["Mismatched reduce ops for tensor 'grad.w1': rank 0 has sum, rank 1 has max"; 2]
    );
    let roots = mismatch(
        |h| err(h.broadcast("grad.w1", vec![0u8], 0)),
        |h| err(h.broadcast("grad.w1", vec![0u8], 1)),
    );
    assert_eq!(
        roots,
        ["Mismatched root ranks for tensor 'grad.w1': rank 0 has 0, rank 1 has 1"; 2]
    );
    let scale = |f: f64| {
        move |h: &Hvd| {
            err(h
                .allreduce_with_async(
                    "grad.w1",
                    vec![1.0f32],
                    Reduction::new(ReduceOp::Sum).with_prescale(f),
                )
                .and_then(|x| x.wait()))
        }
    };
    let prescale = job(2, config(), |hvd| {
        if hvd.rank() == 0 {
            scale(1.0)(&hvd)
        } else {
            scale(0.5)(&hvd)
        }
    });
    assert_eq!(
        prescale,
        ["Mismatched prescale factors for tensor 'grad.w1': rank 0 has 1, rank 1 has 0.5"; 2]
    );
    let gather = mismatch(
        |h| err(h.allgather("grad.w1", Shaped::new(vec![0u8; 4], vec![2, 2]).unwrap())),
        |h| err(h.allgather("grad.w1", Shaped::new(vec![0u8; 6], vec![2, 3]).unwrap())),
    );
    assert_eq!(
        gather,
        ["Mismatched shapes (all dims but the first must match) for tensor 'grad.w1': rank 0 has [2, 2], rank 1 has [2, 3]";
            2]
    );
}

#[test]
fn a_mismatch_fails_only_that_tensor() {
    let results = job(2, config(), |hvd| {
        let bad = hvd
            .allreduce_async("bad", vec![0u8; hvd.rank() + 1], ReduceOp::Sum)
            .unwrap();
        let good = hvd
            .allreduce_async("good", vec![1u8], ReduceOp::Sum)
            .unwrap();
        (bad.wait().unwrap_err().to_string(), good.wait().unwrap())
    });
    let mismatch = "Mismatched shapes for tensor 'bad': rank 0 has [1], rank 1 has [2]".to_string();
    assert_eq!(results, [(mismatch.clone(), vec![2]), (mismatch, vec![2])]);
}

#[test]
fn a_duplicate_name_in_flight_fails_at_once_on_the_submitting_rank() {
    let results = job(2, config(), |hvd| {
        if hvd.rank() == 0 {
            let first = hvd
                .allreduce_async("dup", vec![1i32], ReduceOp::Sum)
                .unwrap();
            let second = err(hvd.allreduce_async("dup", vec![1i32], ReduceOp::Sum));
            hvd.barrier().unwrap(); // rank 1 submits "dup" only after this
            (second, first.wait().unwrap())
        } else {
            hvd.barrier().unwrap();
            (
                String::new(),
                hvd.allreduce("dup", vec![1i32], ReduceOp::Sum).unwrap(),
            )
        }
    });
    assert_eq!(
        results[0].0,
        "rank 0: invalid allreduce of tensor 'dup': a collective with this name is already in flight; names must be unique until their handles complete"
    );
    assert_eq!(
        (results[0].1.clone(), results[1].1.clone()),
        (vec![2], vec![2])
    );
}

#[test]
fn repeated_tensors_take_the_cache_and_skip_the_announcement_round() {
    let results = job(2, config(), |hvd| {
        for step in 0..20 {
            let out = hvd
                .allreduce("grad", vec![step as f32; 8], ReduceOp::Sum)
                .unwrap();
            assert_eq!(out, vec![2.0 * step as f32; 8]);
        }
        hvd.stats()
    });
    for stats in results {
        // The first step announces; the other 19 run from the cache.
        assert_eq!(stats.cache_hits, 19, "{stats:?}");
        assert!(stats.announce_rounds <= 2, "{stats:?}");
        // A blocking call's caller runs its cycles itself (the background thread only
        // when it comes first: at least one of the 20 is the caller's on any machine).
        assert!(stats.caller_cycles >= 1, "{stats:?}");
    }
}

#[test]
fn a_changed_shape_invalidates_the_cache_entry() {
    let results = job(2, config(), |hvd| {
        let a = hvd.allreduce("w", vec![1i64; 4], ReduceOp::Sum).unwrap();
        let b = hvd.allreduce("w", vec![1i64; 4], ReduceOp::Sum).unwrap();
        let c = hvd.allreduce("w", vec![1i64; 6], ReduceOp::Sum).unwrap();
        let d = hvd.allreduce("w", vec![1i64; 6], ReduceOp::Sum).unwrap();
        (a.len(), b.len(), c.len(), d.len(), hvd.stats().cache_hits)
    });
    assert!(results.iter().all(|r| *r == (4, 4, 6, 6, 2)), "{results:?}");
}

/// Nobody waits on these handles: the background thread runs their cycles.
#[test]
fn asynchronous_collectives_complete_while_their_callers_do_not_wait() {
    let results = job(2, config(), |hvd| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                hvd.allreduce_async(&format!("grad.{i}"), vec![i as f32; 4], ReduceOp::Sum)
                    .unwrap()
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !handles.iter().all(|h| h.poll()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let done = handles.iter().all(|h| h.poll());
        let out: Vec<Vec<f32>> = handles.into_iter().map(|h| h.wait().unwrap()).collect();
        (done, out, hvd.stats().caller_cycles)
    });
    for (done, out, caller_cycles) in results {
        assert!(done, "the handles did not complete within 20 s");
        assert_eq!(out, [vec![0.0; 4], vec![2.0; 4], vec![4.0; 4]]);
        assert_eq!(caller_cycles, 0);
    }
}

/// The cached steady state (the waiting caller runs the cycles, no announcement round)
/// still checks every step: a rank that changes a cached tensor is caught on every rank,
/// and the job goes on.
#[test]
fn a_disagreement_after_many_cached_steps_fails_on_every_rank() {
    let results = job(2, config(), |hvd| {
        for _ in 0..50 {
            let out = hvd
                .allreduce("grad", vec![1.0f32; 4], ReduceOp::Sum)
                .unwrap();
            assert_eq!(out, vec![2.0; 4]);
        }
        let hits = hvd.stats().cache_hits;
        // The last 47 steps rode the negotiation round (runtime_speculation.rs), which
        // still catches the change.
        assert_eq!(hvd.stats().speculated, 47);
        let mine = if hvd.rank() == 0 { 4 } else { 5 };
        let error = err(hvd.allreduce("grad", vec![1.0f32; mine], ReduceOp::Sum));
        let after = hvd
            .allreduce("grad", vec![1.0f32; 4], ReduceOp::Sum)
            .unwrap();
        (hits, error, after)
    });
    for (hits, error, after) in results {
        assert_eq!(hits, 49);
        assert_eq!(
            error,
            "Mismatched shapes for tensor 'grad': rank 0 has [4], rank 1 has [5]"
        );
        assert_eq!(after, vec![2.0; 4]);
    }
}

#[test]
fn with_the_cache_off_every_tensor_is_announced() {
    let cfg = hvd::Config {
        cache_capacity: 0,
        ..config()
    };
    let results = job(2, cfg, |hvd| {
        for _ in 0..5 {
            hvd.allreduce("grad", vec![1u8], ReduceOp::Sum).unwrap();
        }
        hvd.stats()
    });
    assert!(
        results
            .iter()
            .all(|s| s.cache_hits == 0 && s.announce_rounds >= 5),
        "{results:?}"
    );
}
