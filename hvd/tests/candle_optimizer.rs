//! The candle integration on jobs of several ranks (threads over the in-process reference
//! transport, each with its own runtime and model): the distributed optimizer steps with
//! the mean of the ranks' gradients, broadcast makes every model the root's, metrics
//! combine every rank's numbers.
#![cfg(feature = "candle")]

mod common;

use candle_core::{DType, Device, Module, Tensor, Var};
use candle_nn::{Optimizer, SGD, VarBuilder, VarMap};
use hvd::candle::{
    DistributedOptimizer, DistributedSampler, broadcast_varmap, broadcast_vars, metrics, named_vars,
};
use hvd::{Hvd, ReduceOp};

const LR: f64 = 0.5;

/// A linear model `3 -> 2` with the same parameters on every rank.
fn model(device: &Device) -> (VarMap, candle_nn::Linear) {
    let varmap = VarMap::new();
    let linear = candle_nn::linear(
        3,
        2,
        VarBuilder::from_varmap(&varmap, DType::F32, device).pp("fc"),
    )
    .unwrap();
    for (i, (_, var)) in named_vars(&varmap).unwrap().into_iter().enumerate() {
        let n = var.elem_count();
        let values: Vec<f32> = (0..n).map(|j| 0.1 * (i * 7 + j) as f32 - 0.3).collect();
        var.set(&Tensor::from_vec(values, var.shape(), device).unwrap())
            .unwrap();
    }
    (varmap, linear)
}

/// A mean-squared-error loss on data that depends on the rank and the pass, so every
/// rank's gradients differ.
fn loss(linear: &candle_nn::Linear, rank: usize, pass: usize, device: &Device) -> Tensor {
    let seed = (rank * 10 + pass) as f32;
    let x: Vec<f32> = (0..12).map(|i| ((i as f32 + seed) * 0.37).sin()).collect();
    let y: Vec<f32> = (0..8).map(|i| ((i as f32 - seed) * 0.23).cos()).collect();
    let x = Tensor::from_vec(x, (4, 3), device).unwrap();
    let y = Tensor::from_vec(y, (4, 2), device).unwrap();
    candle_nn::loss::mse(&linear.forward(&x).unwrap(), &y).unwrap()
}

fn values(varmap: &VarMap) -> Vec<(String, Vec<f32>)> {
    named_vars(varmap)
        .unwrap()
        .into_iter()
        .map(|(name, var)| (name, var.flatten_all().unwrap().to_vec1().unwrap()))
        .collect()
}

/// This rank's own gradients (summed over `passes`), by parameter name, without hvd.
fn local_gradients(
    linear: &candle_nn::Linear,
    varmap: &VarMap,
    rank: usize,
    passes: usize,
) -> Vec<Vec<f32>> {
    let device = Device::Cpu;
    let vars = named_vars(varmap).unwrap();
    let mut sums = vec![vec![0f32; 0]; vars.len()];
    for pass in 0..passes {
        let grads = loss(linear, rank, pass, &device).backward().unwrap();
        for ((_, var), sum) in vars.iter().zip(&mut sums) {
            let g: Vec<f32> = grads
                .get(var)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            if sum.is_empty() {
                *sum = g;
            } else {
                sum.iter_mut().zip(g).for_each(|(s, g)| *s += g);
            }
        }
    }
    sums
}

struct RankResult {
    before: Vec<(String, Vec<f32>)>,
    after: Vec<(String, Vec<f32>)>,
    local: Vec<Vec<f32>>,
    stepped: Vec<bool>,
}

fn train_one_step(hvd: Hvd, passes: usize) -> RankResult {
    let device = Device::Cpu;
    let (varmap, linear) = model(&device);
    let before = values(&varmap);
    let local = local_gradients(&linear, &varmap, hvd.rank(), passes);
    let sgd = SGD::new(varmap.all_vars(), LR).unwrap();
    let mut optimizer = DistributedOptimizer::new(&hvd, sgd, &varmap)
        .unwrap()
        .backward_passes_per_step(passes)
        .unwrap();
    let stepped = (0..passes)
        .map(|pass| {
            let stepped = optimizer
                .backward_step(&loss(&linear, hvd.rank(), pass, &device))
                .unwrap();
            if !stepped {
                assert_eq!(values(&varmap), before, "no update before the last pass");
            }
            stepped
        })
        .collect();
    RankResult {
        before,
        after: values(&varmap),
        local,
        stepped,
    }
}

fn assert_stepped_with_the_mean_gradient(results: &[RankResult]) {
    let n = results.len() as f32;
    for (p, (name, before)) in results[0].before.iter().enumerate() {
        let expected: Vec<f32> = before
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mean = results.iter().map(|r| r.local[p][i]).sum::<f32>() / n;
                w - LR as f32 * mean
            })
            .collect();
        for (rank, result) in results.iter().enumerate() {
            let (after_name, after) = &result.after[p];
            assert_eq!(after_name, name);
            for (a, e) in after.iter().zip(&expected) {
                assert!(
                    (a - e).abs() < 1e-5,
                    "rank {rank} {name}: {after:?} != {expected:?}"
                );
            }
        }
    }
    // The ranks' gradients really differ, so a step with local gradients would not pass.
    assert_ne!(results[0].local, results[1].local);
}

#[test]
fn the_optimizer_steps_with_the_mean_of_the_ranks_gradients() {
    let results = common::job(3, common::config(), |hvd| train_one_step(hvd, 1));
    assert!(results.iter().all(|r| r.stepped == [true]));
    assert_stepped_with_the_mean_gradient(&results);
}

#[test]
fn backward_passes_per_step_sums_the_passes_then_averages_over_ranks() {
    let results = common::job(2, common::config(), |hvd| train_one_step(hvd, 3));
    assert!(results.iter().all(|r| r.stepped == [false, false, true]));
    assert_stepped_with_the_mean_gradient(&results);
}

/// On each of 2 ranks: its own gradients and those `average_gradients` returns, flat and
/// in the varmap's order, with gradients sent as `compression` says.
fn own_and_averaged(compression: hvd::Compression) -> Vec<(Vec<f32>, Vec<f32>)> {
    common::job(2, common::config(), |hvd| {
        let device = Device::Cpu;
        let (varmap, linear) = model(&device);
        let sgd = SGD::new(varmap.all_vars(), LR).unwrap();
        let optimizer = DistributedOptimizer::new(&hvd, sgd, &varmap)
            .unwrap()
            .compression(compression);
        let grads = loss(&linear, hvd.rank(), 0, &device).backward().unwrap();
        let averaged = optimizer.average_gradients(&grads).unwrap();
        let flat = |store: &candle_core::backprop::GradStore| -> Vec<f32> {
            named_vars(&varmap)
                .unwrap()
                .iter()
                .flat_map(|(_, v)| {
                    store
                        .get(v)
                        .unwrap()
                        .flatten_all()
                        .unwrap()
                        .to_vec1::<f32>()
                        .unwrap()
                })
                .collect()
        };
        (flat(&grads), flat(&averaged))
    })
}

#[test]
fn average_gradients_returns_the_mean_without_stepping() {
    let results = own_and_averaged(hvd::Compression::None);
    let (a, b) = (&results[0].0, &results[1].0);
    let mean: Vec<f32> = a.iter().zip(b).map(|(a, b)| (a + b) / 2.0).collect();
    for (_, averaged) in &results {
        for (x, m) in averaged.iter().zip(&mean) {
            assert!((x - m).abs() < 1e-6, "{averaged:?} vs {mean:?}");
        }
    }
}

#[test]
fn compressed_gradients_are_averaged_at_the_wire_precision() {
    let results = own_and_averaged(hvd::Compression::Bf16);
    let bf16 = |x: f32| hvd::core::bf16::from_f32(x).to_f32();
    let (a, b) = (&results[0].0, &results[1].0);
    // Each rank's gradient rounded to bf16, summed and rounded again; halving is exact.
    let expected: Vec<f32> = a
        .iter()
        .zip(b)
        .map(|(a, b)| bf16(bf16(*a) + bf16(*b)) / 2.0)
        .collect();
    let exact: Vec<f32> = a.iter().zip(b).map(|(a, b)| (a + b) / 2.0).collect();
    for (_, averaged) in &results {
        assert_eq!(averaged, &expected);
        assert_ne!(averaged, &exact, "the gradients went through bf16");
    }
}

#[test]
fn a_parameter_without_a_gradient_on_one_rank_counts_as_zeros() {
    let results = common::job(2, common::config(), |hvd| {
        let device = Device::Cpu;
        let used = Var::new(&[1f32, 2.0], &device).unwrap();
        let sometimes = Var::new(&[10f32], &device).unwrap();
        let params = vec![
            ("used".to_string(), used.clone()),
            ("sometimes".to_string(), sometimes.clone()),
        ];
        let sgd = SGD::new(vec![used.clone(), sometimes.clone()], 1.0).unwrap();
        let mut optimizer = DistributedOptimizer::with_named_vars(&hvd, sgd, params).unwrap();
        // Rank 0's loss involves `sometimes` (gradient 4), rank 1's does not.
        let mut loss = used.sum_all().unwrap();
        if hvd.rank() == 0 {
            loss = (loss + (sometimes.as_tensor() * 4.0).unwrap().sum_all().unwrap()).unwrap();
        }
        optimizer.backward_step(&loss).unwrap();
        (
            used.to_vec1::<f32>().unwrap(),
            sometimes.to_vec1::<f32>().unwrap(),
        )
    });
    for (used, sometimes) in results {
        assert_eq!(used, vec![0.0, 1.0]);
        assert_eq!(sometimes, vec![8.0], "10 - mean(4, 0)");
    }
}

#[test]
fn bad_optimizer_options_are_refused_with_clear_errors() {
    common::job(1, common::config(), |hvd| {
        let varmap = VarMap::new();
        let optimizer =
            || DistributedOptimizer::new(&hvd, SGD::new(vec![], 0.1).unwrap(), &varmap).unwrap();
        assert_eq!(
            optimizer()
                .backward_passes_per_step(0)
                .unwrap_err()
                .to_string(),
            "invalid value \"0\" for backward_passes_per_step: expected at least 1"
        );
        assert_eq!(
            optimizer().op(ReduceOp::Max).unwrap_err().to_string(),
            "invalid value \"Max\" for DistributedOptimizer op: expected Average or Sum"
        );
        let var = Var::new(&[1f32], &Device::Cpu).unwrap();
        let twice = vec![("w".to_string(), var.clone()), ("w".to_string(), var)];
        assert_eq!(
            DistributedOptimizer::with_named_vars(&hvd, SGD::new(vec![], 0.1).unwrap(), twice)
                .unwrap_err()
                .to_string(),
            "rank 0: invalid allreduce of tensor 'w': two variables have this name; every variable needs its own"
        );
    });
}

#[test]
fn broadcast_makes_every_rank_start_from_the_roots_parameters() {
    let results = common::job(3, common::config(), |hvd| {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        // candle's default initialisation is random: every rank starts different.
        candle_nn::linear(16, 8, vb.pp("a")).unwrap();
        candle_nn::linear(8, 4, vb.pp("b")).unwrap();
        let before = values(&varmap);
        broadcast_varmap(&hvd, &varmap, 1).unwrap();
        (before, values(&varmap))
    });
    assert_ne!(results[0].0, results[1].0, "random starts differ");
    for (rank, (_, after)) in results.iter().enumerate() {
        assert_eq!(after, &results[1].0, "rank {rank} has rank 1's parameters");
    }
}

#[test]
fn broadcast_keeps_each_variables_dtype_and_refuses_u32() {
    let results = common::job(2, common::config(), |hvd| {
        let device = Device::Cpu;
        let r = hvd.rank() as f64;
        let half = Var::from_tensor(
            &Tensor::new(&[r, r + 0.5], &device)
                .unwrap()
                .to_dtype(DType::BF16)
                .unwrap(),
        )
        .unwrap();
        let counts = Var::from_tensor(&Tensor::new(&[r as i64 * 3], &device).unwrap()).unwrap();
        broadcast_vars(
            &hvd,
            &[
                ("half".into(), half.clone()),
                ("counts".into(), counts.clone()),
            ],
            0,
        )
        .unwrap();
        let unsupported = Var::from_tensor(&Tensor::new(&[1u32], &device).unwrap()).unwrap();
        let err = broadcast_vars(&hvd, &[("u32".into(), unsupported)], 0).unwrap_err();
        (
            half.dtype(),
            half.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap(),
            counts.to_vec1::<i64>().unwrap(),
            err.to_string(),
        )
    });
    for (rank, (dtype, half, counts, err)) in results.into_iter().enumerate() {
        assert_eq!(dtype, DType::BF16);
        assert_eq!(half, vec![0.0, 0.5]);
        assert_eq!(counts, vec![0]);
        assert_eq!(
            err,
            format!(
                "rank {rank}: invalid broadcast of tensor 'u32': candle dtype U32 has no hvd equivalent"
            )
        );
    }
}

#[test]
fn metrics_average_and_sum_over_the_ranks() {
    let results = common::job(3, common::config(), |hvd| {
        let r = hvd.rank() as f64;
        (
            metrics::average(&hvd, "loss", r).unwrap(),
            metrics::sum(&hvd, "accuracy", &[r, 10.0]).unwrap(),
        )
    });
    for (average, sums) in results {
        assert_eq!(average, 1.0);
        assert_eq!(sums, vec![3.0, 30.0]);
    }
}

#[test]
fn the_samplers_of_a_job_split_the_data_between_its_ranks() {
    let shards = common::job(3, common::config(), |hvd| {
        let mut sampler = DistributedSampler::for_set(100, &hvd).unwrap().seed(9);
        sampler.set_epoch(4);
        sampler.indices()
    });
    assert!(shards.iter().all(|s| s.len() == 34));
    let mut all: Vec<usize> = shards.concat();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
}
