//! Data-parallel training of a candle model with hvd: an MLP on MNIST (or on a synthetic
//! stand-in when no data is given), on as many ranks as the launcher starts.
//!
//! ```text
//! cargo build --release --features hvd/candle --example train_mnist -p hvd -p hvdrun
//! target/release/hvdrun -np 2 target/release/examples/train_mnist --epochs 3
//! target/release/hvdrun -np 2 target/release/examples/train_mnist --data mnist/ --checkpoint mlp.safetensors
//! ```
//!
//! Horovod's four steps are marked below: init, pin the device, wrap the optimizer,
//! broadcast the initial state. Each epoch every rank trains on its shard of a fresh
//! shuffle; rank 0 prints the epoch's training loss and test accuracy (both over the
//! whole job) and the throughput, and saves the checkpoint at the end.

pub(crate) mod data;
mod model;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use candle_core::{D, DType, Device, Module};
use candle_nn::{Optimizer, SGD, VarBuilder, VarMap};
use clap::Parser;
use hvd::ProcessSet;
use hvd::candle::{DistributedOptimizer, DistributedSampler, broadcast_varmap, metrics};

use data::Split;
use model::Mlp;
use progress::Progress;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Trains an MLP on MNIST (or a synthetic stand-in) on every rank of an hvd job.
#[derive(Debug, Parser)]
#[command(name = "train_mnist")]
pub struct Args {
    /// Passes over the training set.
    #[arg(long, default_value_t = 3)]
    pub epochs: usize,
    /// Global batch: the examples of one step over all ranks together (each rank takes
    /// batch / ranks), so any number of ranks computes the same steps.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// SGD learning rate.
    #[arg(long, default_value_t = 0.1)]
    pub lr: f64,
    /// A directory with MNIST's four IDX files (uncompressed); without it, the synthetic
    /// dataset described in data.rs.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Training examples of the synthetic dataset (it has a sixth as many test examples;
    /// the default matches MNIST's 60 000 and 10 000).
    #[arg(long, default_value_t = 60_000)]
    pub synthetic_examples: usize,
    /// Seed of the initial model and of the shuffles.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where rank 0 saves the trained model (safetensors).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: Option<PathBuf>,
    /// Where to train: `cpu`, or `cuda` (one GPU per local rank; needs hvd built with the
    /// `candle-cuda` feature).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
    pub device: String,
}

/// What the last epoch reached, the same on every rank.
#[derive(Debug)]
pub struct Summary {
    pub loss: f64,
    pub accuracy: f64,
    pub examples_per_second: f64,
}

fn main() -> ExitCode {
    match train(&Args::parse()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("train_mnist: {err}");
            ExitCode::FAILURE
        }
    }
}

pub fn train(args: &Args) -> Result<Summary, BoxError> {
    if args.epochs == 0 {
        return Err("--epochs must be at least 1".into());
    }
    // Step 1: join the job the launcher started (one rank when run on its own).
    let hvd = hvd::init()?;
    let (rank, size) = (hvd.rank(), hvd.size());
    if args.batch == 0 || !args.batch.is_multiple_of(size) {
        return Err(format!(
            "--batch {} must be a positive multiple of the number of ranks ({size})",
            args.batch
        )
        .into());
    }
    let local_batch = args.batch / size;
    // Step 2: pin the device. On a CPU there is nothing to pin (hvdrun -x
    // RAYON_NUM_THREADS=N gives each rank its share of the cores); with CUDA, one GPU
    // per local rank.
    let device = match args.device.as_str() {
        "cuda" => Device::new_cuda(hvd.local_rank()).map_err(|e| {
            // candle's error ends with a backtrace: its first line says what failed.
            let what = e.to_string();
            let what = what.lines().next().unwrap_or_default().to_string();
            if cfg!(feature = "candle-cuda") {
                format!("--device cuda: GPU {}: {what}", hvd.local_rank())
            } else {
                format!("--device cuda: {what} (build with --features hvd/candle-cuda, on a machine with a GPU)")
            }
        })?,
        _ => Device::Cpu,
    };

    let dataset = match &args.data {
        Some(dir) => data::mnist(dir)?,
        None => data::synthetic(args.synthetic_examples, args.synthetic_examples / 6),
    };
    let varmap = VarMap::new();
    let model = Mlp::new(VarBuilder::from_varmap(&varmap, DType::F32, &device))?;
    model::initialize(&varmap, args.seed)?;

    // Step 3: wrap the optimizer, so each step uses gradients averaged over the ranks.
    let sgd = SGD::new(varmap.all_vars(), args.lr)?;
    let mut optimizer = DistributedOptimizer::new(&hvd, sgd, &varmap)?;
    // Step 4: start every rank from rank 0's model.
    broadcast_varmap(&hvd, &varmap, 0)?;

    let mut sampler = DistributedSampler::for_set(dataset.train.len(), &hvd)?.seed(args.seed);
    if sampler.num_samples() < local_batch {
        return Err(format!(
            "--batch {} is larger than the training set ({} examples): no step could run",
            args.batch,
            dataset.train.len()
        )
        .into());
    }
    let progress = Progress::new(rank == 0);
    let mut summary = None;
    for epoch in 1..=args.epochs {
        sampler.set_epoch(epoch as u64);
        let mine = sampler.indices();
        let steps = mine.len() / local_batch;
        let started = Instant::now();
        let mut loss_sum = 0f64;
        for (step, batch) in mine.chunks_exact(local_batch).enumerate() {
            let (images, labels) = dataset.train.batch(batch, &device)?;
            let loss = candle_nn::loss::cross_entropy(&model.forward(&images)?, &labels)?;
            optimizer.backward_step(&loss)?;
            let loss = loss.to_scalar::<f32>()?;
            loss_sum += f64::from(loss);
            progress.update(epoch, step + 1, steps, loss);
        }
        let examples_per_second = (steps * args.batch) as f64 / started.elapsed().as_secs_f64();
        progress.clear();

        let loss = metrics::average(&hvd, "loss", loss_sum / steps.max(1) as f64)?;
        let accuracy = test_accuracy(&hvd, &model, &dataset.test, &device)?;
        if rank == 0 {
            println!(
                "epoch {epoch:>2}/{}  loss {loss:.4}  test accuracy {:5.2}%  {examples_per_second:>8.0} examples/s on {size} rank{}",
                args.epochs,
                100.0 * accuracy,
                if size == 1 { "" } else { "s" }
            );
        }
        summary = Some(Summary {
            loss,
            accuracy,
            examples_per_second,
        });
    }
    if let (0, Some(path)) = (rank, &args.checkpoint) {
        varmap.save(path)?;
        println!("checkpoint saved to {}", path.display());
    }
    summary.ok_or_else(|| "no epoch ran".into())
}

/// Accuracy on the whole test set: each rank scores every size-th example (exact shards,
/// no padding: one allreduce at the end, so ranks need not take equal steps).
fn test_accuracy(
    set: &ProcessSet,
    model: &Mlp,
    test: &Split,
    device: &Device,
) -> Result<f64, BoxError> {
    let (rank, size) = set.topology().map_or((0, 1), |t| (t.rank(), t.size()));
    let mine: Vec<usize> = (rank..test.len()).step_by(size).collect();
    let mut correct = 0f64;
    for batch in mine.chunks(1024) {
        let (images, labels) = test.batch(batch, device)?;
        let predicted = model.forward(&images)?.argmax(D::Minus1)?;
        correct += f64::from(
            predicted
                .eq(&labels)?
                .to_dtype(DType::F32)?
                .sum_all()?
                .to_scalar::<f32>()?,
        );
    }
    let totals = metrics::sum(set, "accuracy", &[correct, mine.len() as f64])?;
    Ok(totals[0] / totals[1].max(1.0))
}
