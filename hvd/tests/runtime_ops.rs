//! Every collective of the runtime, over several in-process ranks.

mod common;

use std::collections::BTreeMap;

use common::{config, job};
use hvd::{Bools, ReduceOp, Reduction, Shaped};

#[test]
fn allreduce_sums_and_averages_every_rank() {
    let results = job(3, config(), |hvd| {
        let r = hvd.rank() as f32;
        let sum = hvd.allreduce("s", vec![r, 1.0], ReduceOp::Sum).unwrap();
        let avg = hvd.allreduce("a", vec![r], ReduceOp::Average).unwrap();
        let scaled = hvd
            .allreduce_with_async(
                "p",
                vec![r as i32 + 1],
                Reduction::new(ReduceOp::Sum).with_postscale(2.0),
            )
            .unwrap()
            .wait()
            .unwrap();
        (sum, avg, scaled)
    });
    for (sum, avg, scaled) in results {
        assert_eq!(sum, [3.0, 3.0]);
        assert_eq!(avg, [1.0]);
        assert_eq!(scaled, [12]);
    }
}

#[test]
fn grouped_allreduce_returns_every_tensor() {
    let results = job(2, config(), |hvd| {
        let tensors = (0..50)
            .map(|i| (format!("g{i}"), vec![i as f64; 3]))
            .collect();
        hvd.grouped_allreduce(tensors, ReduceOp::Sum).unwrap()
    });
    for out in results {
        assert_eq!(out.len(), 50);
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, t)| *t == vec![2.0 * i as f64; 3])
        );
    }
}

#[test]
fn allgather_concatenates_different_first_dims() {
    let results = job(3, config(), |hvd| {
        let r = hvd.rank();
        // Rank r contributes r+1 rows of 2 elements, all equal to r.
        let mine = Shaped::new(vec![r as i32; 2 * (r + 1)], vec![r + 1, 2]).unwrap();
        hvd.allgather("g", mine).unwrap()
    });
    for out in results {
        assert_eq!(out.shape, [6, 2]);
        assert_eq!(out.data, [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
    }
}

#[test]
fn broadcast_from_a_non_zero_root_and_a_parameter_map() {
    let results = job(3, config(), |hvd| {
        let r = hvd.rank() as f32;
        let w = hvd.broadcast("w", vec![r; 4], 2).unwrap();
        let params: BTreeMap<String, Vec<f32>> = [
            ("layer1.weight".to_string(), vec![r; 2]),
            ("layer1.bias".to_string(), vec![r + 10.0]),
        ]
        .into();
        (w, hvd.broadcast_parameters(params, 1).unwrap())
    });
    for (w, params) in results {
        assert_eq!(w, [2.0; 4]);
        assert_eq!(params["layer1.weight"], [1.0, 1.0]);
        assert_eq!(params["layer1.bias"], [11.0]);
    }
}

#[test]
fn alltoall_sends_splits_and_reports_rows_received() {
    let results = job(3, config(), |hvd| {
        let r = hvd.rank();
        // Rank r sends d+1 rows to rank d, each row tagged with 10*r + d.
        let splits: Vec<usize> = (0..3).map(|d| d + 1).collect();
        let data: Vec<i64> = (0..3)
            .flat_map(|d| vec![(10 * r + d) as i64; d + 1])
            .collect();
        hvd.alltoall("a2a", data, &splits).unwrap()
    });
    for (rank, (data, rows)) in results.into_iter().enumerate() {
        assert_eq!(rows, [rank + 1; 3]);
        let expected: Vec<i64> = (0..3)
            .flat_map(|s| vec![(10 * s + rank) as i64; rank + 1])
            .collect();
        assert_eq!(data, expected);
    }
}

#[test]
fn reducescatter_gives_the_first_ranks_one_more_row() {
    let results = job(3, config(), |hvd| {
        let t = Shaped::new(vec![1u16; 7 * 2], vec![7, 2]).unwrap();
        hvd.reducescatter("rs", t, ReduceOp::Sum).unwrap()
    });
    let shapes: Vec<Vec<usize>> = results.iter().map(|t| t.shape.clone()).collect();
    assert_eq!(shapes, [vec![3, 2], vec![2, 2], vec![2, 2]]);
    assert!(results.iter().all(|t| t.data.iter().all(|v| *v == 3)));
}

#[test]
fn reducescatter_scales_each_contribution_and_the_result() {
    let results = job(2, config(), |hvd| {
        let t = vec![hvd.rank() as f32 + 1.0; 4];
        let reduction = Reduction::new(ReduceOp::Sum)
            .with_prescale(0.5)
            .with_postscale(3.0);
        hvd.reducescatter_with_async("rs", t, reduction)
            .unwrap()
            .wait()
            .unwrap()
    });
    // (0.5 * 1 + 0.5 * 2) * 3, two rows each.
    assert_eq!(results, [vec![4.5f32; 2], vec![4.5; 2]]);
}

#[test]
fn adasum_combines_the_ranks_pairwise_and_batches_with_its_neighbours() {
    let results = job(4, config(), |hvd| {
        let r = hvd.rank();
        // Equal within the first pairs (equal vectors average: [2, 0] and [0, 3]), then
        // orthogonal between them (orthogonal vectors add up: [2, 3]).
        let mine = if r < 2 {
            vec![2.0f64, 0.0]
        } else {
            vec![0.0, 3.0]
        };
        let single = hvd.adasum_async("single", vec![1.0f32; 3]).unwrap();
        let out = hvd.adasum("pair", mine).unwrap();
        (out, single.wait().unwrap())
    });
    for (out, single) in results {
        assert_eq!(out, [2.0, 3.0]);
        assert_eq!(single, [1.0; 3]);
    }
}

#[test]
fn adasum_refuses_integers_and_groups_that_are_not_a_power_of_two() {
    let results = job(3, config(), |hvd| {
        let ints = hvd
            .adasum_async("ints", vec![1i32])
            .unwrap_err()
            .to_string();
        let three = hvd
            .adasum_async("three", vec![1.0f32])
            .unwrap_err()
            .to_string();
        (ints, three)
    });
    assert_eq!(
        results[1],
        (
            "rank 1: invalid adasum of tensor 'ints': Adasum combines floating-point tensors (f16, bf16, f32, f64), not i32".to_string(),
            "rank 1: invalid adasum of tensor 'three': Adasum needs a power-of-two number of ranks; this group has 3".to_string()
        )
    );
}

#[test]
fn bool_tensors_reduce_with_any_and_all() {
    let results = job(2, config(), |hvd| {
        let mine = Bools::from_bools(&[hvd.rank() == 0, true, false]);
        let any = hvd.allreduce("any", mine.clone(), ReduceOp::Max).unwrap();
        let all = hvd.allreduce("all", mine, ReduceOp::Min).unwrap();
        (any.to_bools(), all.to_bools())
    });
    for (any, all) in results {
        assert_eq!(any, [true, true, false]);
        assert_eq!(all, [false, true, false]);
    }
}

#[test]
fn barrier_returns_on_every_rank() {
    let results = job(4, config(), |hvd| {
        (0..5).map(|_| hvd.barrier()).collect::<Result<Vec<_>, _>>()
    });
    assert!(results.iter().all(Result::is_ok));
}

#[test]
fn a_job_of_one_rank_needs_no_peers() {
    let results = job(1, config(), |hvd| {
        (
            hvd.rank(),
            hvd.size(),
            hvd.allreduce("x", vec![5u8], ReduceOp::Sum).unwrap(),
        )
    });
    assert_eq!(results, [(0, 1, vec![5])]);
}
