//! Small cached allreduces of a set that repeats ride the negotiation round: one
//! collective per step instead of two, with the same results, and a rank that does
//! something else is still caught.

mod common;

use common::{config, job, job_with_sets};
use hvd::{ReduceOp, Reduction};

/// The first step announces, the next two run from the cache and make the set
/// expected; every later step rides the negotiation round.
#[test]
fn a_repeated_small_allreduce_rides_the_negotiation_round() {
    let results = job(2, config(), |hvd| {
        for step in 0..20 {
            let out = hvd
                .allreduce(
                    "grad",
                    vec![step as f32 + hvd.rank() as f32; 8],
                    ReduceOp::Sum,
                )
                .unwrap();
            assert_eq!(out, vec![2.0 * step as f32 + 1.0; 8], "step {step}");
        }
        hvd.stats()
    });
    for stats in results {
        assert_eq!((stats.cache_hits, stats.speculated), (19, 17), "{stats:?}");
    }
}

/// Rank `r` of 3 contributes `value(r, step)`; returns every rank's results and how many
/// of the tensors travelled in the negotiation round.
fn steps<T>(
    name: &str,
    reduction: Reduction,
    value: fn(usize, usize) -> T,
) -> Vec<(Vec<Vec<T>>, u64)>
where
    T: hvd::core::Element + Send,
    Vec<T>: hvd::Buffer,
{
    job(3, config(), |hvd| {
        let out = (0..8)
            .map(|step| {
                let mine = vec![value(hvd.rank(), step); 5];
                hvd.allreduce_with_async(name, mine, reduction)
                    .unwrap()
                    .wait()
                    .unwrap()
            })
            .collect();
        (out, hvd.stats().speculated)
    })
}

#[test]
fn a_speculated_average_with_scale_factors_equals_the_usual_one() {
    // Each step: 0.5 x (1 + 2 + 3)(s + 1), divided by 3 ranks, times 2.
    let reduction = Reduction::new(ReduceOp::Average)
        .with_prescale(0.5)
        .with_postscale(2.0);
    for (out, speculated) in steps("w", reduction, |r, s| ((r + 1) * (s + 1)) as f64) {
        let expected: Vec<Vec<f64>> = (0..8).map(|s| vec![2.0 * (s + 1) as f64; 5]).collect();
        assert_eq!(out, expected);
        assert_eq!(speculated, 5);
    }
}

#[test]
fn a_speculated_integer_average_truncates_like_the_usual_one() {
    // Rank 0 adds one to every step's sum: (1 + 3 s) / 3 truncates to s.
    let value = |r: usize, s: usize| i32::from(r == 0) + s as i32;
    for (out, speculated) in steps("n", Reduction::new(ReduceOp::Average), value) {
        let expected: Vec<Vec<i32>> = (0..8).map(|s| vec![s; 5]).collect();
        assert_eq!(out, expected);
        assert_eq!(speculated, 5);
    }
}

/// Rank `r` says `r == step % 4`: the sum of bools is their OR, false when no rank of
/// the three says true (every fourth step).
#[test]
fn a_speculated_bool_sum_is_a_logical_or() {
    let results = job(3, config(), |hvd| {
        let out: Vec<Vec<bool>> = (0..8)
            .map(|step| {
                let mine = hvd::Bools::from_bools(&[hvd.rank() == step % 4; 5]);
                hvd.allreduce("b", mine, ReduceOp::Sum).unwrap().to_bools()
            })
            .collect();
        (out, hvd.stats().speculated)
    });
    for (out, speculated) in results {
        let expected: Vec<Vec<bool>> = (0..8).map(|s| vec![s % 4 != 3; 5]).collect();
        assert_eq!(out, expected);
        assert_eq!(speculated, 5);
    }
}

#[test]
fn min_and_max_never_ride() {
    for (out, speculated) in steps("m", Reduction::new(ReduceOp::Max), |r, s| (r * s) as i64) {
        let expected: Vec<Vec<i64>> = (0..8).map(|s| vec![2 * s as i64; 5]).collect();
        assert_eq!(out, expected);
        assert_eq!(speculated, 0);
    }
}

/// 16 KiB in all rides (the last 5 of 8 steps); one byte more never does.
#[test]
fn sixteen_kib_rides_and_a_byte_more_does_not() {
    let results = job(2, config(), |hvd| {
        for (name, len) in [("edge", 16 * 1024), ("over", 16 * 1024 + 1)] {
            for _ in 0..8 {
                let out = hvd.allreduce(name, vec![1u8; len], ReduceOp::Sum).unwrap();
                assert!(out.iter().all(|v| *v == 2), "{name}");
            }
        }
        hvd.stats()
    });
    assert!(results.iter().all(|s| s.speculated == 5), "{results:?}");
}

/// Once a rank joins, nothing rides (a joined rank contributes zeros through the usual
/// path), and the others still get their sums.
#[test]
fn a_rank_that_joins_while_a_set_is_expected_gets_zeros_added_not_a_guess() {
    let results = job(2, config(), |hvd| {
        let r = hvd.rank();
        let mut sums = Vec::new();
        for step in 0..6 {
            let mine = vec![(r + 1) as f32; 3];
            sums.push(hvd.allreduce("grad", mine, ReduceOp::Sum).unwrap()[0]);
            assert_eq!(sums[step], 3.0);
        }
        if r == 0 {
            for _ in 0..3 {
                sums.push(
                    hvd.allreduce("grad", vec![1.0f32; 3], ReduceOp::Sum)
                        .unwrap()[0],
                );
            }
        }
        (sums, hvd.join().unwrap(), hvd.stats().speculated)
    });
    assert_eq!(results[0].0, [3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0]);
    assert_eq!(results[1].0, [3.0; 6]);
    for (_, last_joined, speculated) in results {
        assert_eq!((last_joined, speculated), (0, 3));
    }
}

/// A process set's engine keeps its own expectation.
#[test]
fn allreduces_within_a_process_set_ride_too() {
    let results = job_with_sets(3, config(), vec![vec![0, 2]], |hvd| {
        let set = hvd.process_set(1).unwrap();
        if !set.is_member() {
            return None;
        }
        for _ in 0..8 {
            let out = set
                .allreduce("x", vec![hvd.rank() as i32], ReduceOp::Sum)
                .unwrap();
            assert_eq!(out, vec![2]);
        }
        Some((set.stats().speculated, hvd.stats().speculated))
    });
    assert_eq!(results, [Some((5, 0)), None, Some((5, 0))]);
}

/// More tensors per step than the cache holds: slots are evicted and reused while sets
/// are expected, and every result is still right.
#[test]
fn a_cache_smaller_than_a_step_keeps_every_result_right() {
    let cfg = hvd::Config {
        cache_capacity: 8,
        ..config()
    };
    let results = job(2, cfg, |hvd| {
        for step in 0..6 {
            let handles: Vec<_> = (0..20)
                .map(|i| {
                    let mine = vec![(step * 100 + i) as i64 + hvd.rank() as i64; 2];
                    hvd.allreduce_async(&format!("g{i}"), mine, ReduceOp::Sum)
                        .unwrap()
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                let expected = 2 * (step * 100 + i) as i64 + 1;
                assert_eq!(h.wait().unwrap(), vec![expected; 2], "step {step} g{i}");
            }
        }
        for step in 0..6 {
            let out = hvd
                .allreduce("after", vec![step as i64; 2], ReduceOp::Sum)
                .unwrap();
            assert_eq!(out, vec![2 * step as i64; 2]);
        }
        hvd.stats().speculated
    });
    // How many of the 20 ride depends on how the bursts split into cycles; the ranks
    // agree on it whatever it is, and the last three steps of 'after' always ride.
    assert_eq!(results[0], results[1]);
    assert!(results[0] >= 3, "{results:?}");
}

/// Several tensors of different dtypes in one round: the ranks submit them together
/// each step until a step's set has repeated and ridden; every result is checked.
#[test]
fn a_set_of_mixed_dtypes_rides_with_every_result_intact() {
    let results = job(2, config(), |hvd| {
        let r = hvd.rank();
        for step in 0..2000 {
            let a = hvd.allreduce_async("a", vec![step as f32 + r as f32; 3], ReduceOp::Sum);
            let b = hvd.allreduce_async(
                "b",
                vec![step as f64 * (r + 1) as f64; 7],
                ReduceOp::Average,
            );
            let c = hvd.allreduce_async("c", vec![step as i16 - r as i16; 2], ReduceOp::Sum);
            let a = a.unwrap().wait().unwrap();
            let b = b.unwrap().wait().unwrap();
            let c = c.unwrap().wait().unwrap();
            assert_eq!(a, vec![2.0 * step as f32 + 1.0; 3], "step {step}");
            assert_eq!(b, vec![1.5 * step as f64; 7], "step {step}");
            assert_eq!(c, vec![2 * step as i16 - 1; 2], "step {step}");
            // Both ranks see the same count: they stop after the same step.
            if hvd.stats().speculated >= 6 {
                return (step, hvd.stats());
            }
        }
        (2000, hvd.stats())
    });
    assert_eq!(results[0].0, results[1].0, "{results:?}");
    assert!(
        results.iter().all(|(steps, _)| *steps < 2000),
        "{results:?}"
    );
}

/// While a set is expected, rank 1 runs another tensor first and rank 0 waits for it
/// with the expected tensor pending: the rounds in between carry rank 0's data for
/// nothing and drop it, every result is right, and the set rides once rank 1 comes.
#[test]
fn a_rank_that_runs_something_else_first_drops_the_guess_and_loses_nothing() {
    let results = job(2, config(), |hvd| {
        let submit_grad = || {
            hvd.allreduce_async("grad", vec![1.0f32; 4], ReduceOp::Sum)
                .unwrap()
        };
        for step in 0..6 {
            assert_eq!(submit_grad().wait().unwrap(), vec![2.0; 4], "step {step}");
        }
        let before = hvd.stats().speculated;
        let other = || {
            hvd.allreduce_async("other", vec![5i32], ReduceOp::Sum)
                .unwrap()
        };
        let results = if hvd.rank() == 1 {
            let other = other().wait().unwrap();
            (other, submit_grad().wait().unwrap())
        } else {
            let (grad, other) = (submit_grad(), other());
            (other.wait().unwrap(), grad.wait().unwrap())
        };
        for _ in 0..3 {
            assert_eq!(submit_grad().wait().unwrap(), vec![2.0; 4]);
        }
        (before, results, hvd.stats().speculated)
    });
    for (before, results, after) in results {
        assert_eq!(before, 3);
        assert_eq!(results, (vec![10], vec![2.0; 4]));
        // 'other' was announced, which leaves the expectation alone: the delayed step
        // and the three after it all rode.
        assert_eq!(after, before + 4);
    }
}
