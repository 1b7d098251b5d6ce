//! Data-parallel training with hvd: logistic regression on a synthetic dataset, written
//! with Horovod's four steps (init, pin the device — nothing to pin on a CPU —, average
//! the gradients, broadcast the initial weights).
//!
//! ```text
//! cargo run --release -p hvdrun --example train_logistic -- --np 2
//! ```
//!
//! The dataset is deterministic and learnable: 32 features drawn uniformly from [-1, 1],
//! labelled by the sign of a fixed hidden linear function plus a little label noise (5 %
//! of labels flipped), 16 384 training and 4 096 test examples. Each epoch reshuffles the
//! training set from a seed every rank shares, and rank r trains on every size-th
//! example: disjoint shards that together cover the set.

use std::time::Instant;

use hvd::core::rng::SplitMix64;
use hvd::{Hvd, ReduceOp};
use hvdrun::{Job, JobOutcome};

const FEATURES: usize = 32;
const TRAIN: usize = 16_384;
const TEST: usize = 4_096;

/// The data's generator: SplitMix64 from a seed, so every rank builds the same data.
struct Rng(SplitMix64);

impl Rng {
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        (self.0.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

struct Dataset {
    x: Vec<[f32; FEATURES]>,
    y: Vec<f32>,
}

fn dataset(n: usize, seed: u64) -> Dataset {
    let mut hidden = Rng(SplitMix64::new(7));
    let truth: Vec<f32> = (0..FEATURES).map(|_| hidden.uniform()).collect();
    let mut rng = Rng(SplitMix64::new(seed));
    let mut data = Dataset {
        x: Vec::with_capacity(n),
        y: Vec::with_capacity(n),
    };
    for _ in 0..n {
        let mut x = [0f32; FEATURES];
        x.iter_mut().for_each(|v| *v = rng.uniform());
        let score: f32 = x.iter().zip(&truth).map(|(a, b)| a * b).sum();
        let flip = rng.0.next_u64() % 100 < 5;
        data.x.push(x);
        data.y.push(if (score > 0.0) != flip { 1.0 } else { 0.0 });
    }
    data
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

/// Loss and gradient (weights then bias) of a mini-batch.
fn gradient(w: &[f32], data: &Dataset, batch: &[usize]) -> (f32, Vec<f32>) {
    let mut grad = vec![0f32; FEATURES + 1];
    let mut loss = 0.0;
    for &i in batch {
        let z = data.x[i].iter().zip(w).map(|(a, b)| a * b).sum::<f32>() + w[FEATURES];
        let p = sigmoid(z);
        let err = p - data.y[i];
        loss -= data.y[i] * p.max(1e-7).ln() + (1.0 - data.y[i]) * (1.0 - p).max(1e-7).ln();
        data.x[i]
            .iter()
            .zip(&mut grad)
            .for_each(|(x, g)| *g += err * x);
        grad[FEATURES] += err;
    }
    let n = batch.len().max(1) as f32;
    grad.iter_mut().for_each(|g| *g /= n);
    (loss / n, grad)
}

/// This rank's shard of a permutation shuffled from `seed` (the same on every rank).
fn shard(n: usize, seed: u64, rank: usize, size: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = Rng(SplitMix64::new(seed));
    for i in (1..n).rev() {
        order.swap(i, (rng.0.next_u64() % (i as u64 + 1)) as usize);
    }
    order.into_iter().skip(rank).step_by(size).collect()
}

fn train(hvd: &Hvd, epochs: usize, global_batch: usize) -> hvd::Result<()> {
    let (rank, size) = (hvd.rank(), hvd.size());
    let (train_set, test_set) = (dataset(TRAIN, 1), dataset(TEST, 2));
    // Step 4 of 4: every rank starts from rank 0's weights.
    let init: Vec<f32> = (0..=FEATURES)
        .map(|i| if rank == 0 { 0.01 * i as f32 } else { 0.0 })
        .collect();
    let mut w = hvd.broadcast("weights", init, 0)?;
    let local_batch = (global_batch / size).max(1);
    let started = Instant::now();
    for epoch in 0..epochs {
        let mine = shard(TRAIN, 100 + epoch as u64, rank, size);
        let mut epoch_loss = 0.0;
        let steps = mine.len() / local_batch;
        for step in 0..steps {
            let (loss, grad) = gradient(
                &w,
                &train_set,
                &mine[step * local_batch..(step + 1) * local_batch],
            );
            // Step 3 of 4: average the gradients across ranks.
            let grad = hvd.allreduce("grad", grad, ReduceOp::Average)?;
            w.iter_mut().zip(&grad).for_each(|(w, g)| *w -= 0.5 * g);
            epoch_loss += loss;
        }
        // Accuracy on the test set, each rank counting its shard.
        let test_shard = shard(TEST, 0, rank, size);
        let correct = test_shard
            .iter()
            .filter(|&&i| {
                let z = test_set.x[i]
                    .iter()
                    .zip(&w)
                    .map(|(a, b)| a * b)
                    .sum::<f32>()
                    + w[FEATURES];
                (z > 0.0) == (test_set.y[i] > 0.5)
            })
            .count();
        let totals = hvd.allreduce(
            "accuracy",
            vec![correct as f64, test_shard.len() as f64],
            ReduceOp::Sum,
        )?;
        let loss = hvd.allreduce(
            "loss",
            vec![epoch_loss / steps.max(1) as f32],
            ReduceOp::Average,
        )?;
        if rank == 0 {
            let seen = (epoch + 1) * steps * local_batch * size;
            println!(
                "epoch {:>2}  loss {:.4}  test accuracy {:>5.1}%  {:>9.0} examples/s on {size} ranks",
                epoch + 1,
                loss[0],
                100.0 * totals[0] / totals[1],
                seen as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

fn arg(name: &str, default: usize) -> Result<usize, String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a number")),
    }
}

fn main() -> Result<(), String> {
    let np = arg("--np", 1)?;
    let launched = std::env::var_os("HVD_RANK").is_some();
    if np > 1 && !launched {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        return match Job::new(me, std::env::args().skip(1).collect(), np)
            .handle_interrupts()
            .run()
            .map_err(|e| e.to_string())?
        {
            JobOutcome::Success => Ok(()),
            failed => Err(failed.to_string()),
        };
    }
    // Step 1 of 4: join the job (step 2, pinning a device, has nothing to do on a CPU).
    let hvd = hvd::init().map_err(|e| e.to_string())?;
    train(&hvd, arg("--epochs", 5)?, arg("--batch", 64)?).map_err(|e| e.to_string())
}
