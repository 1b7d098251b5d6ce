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
//! broadcast the initial state. Each epoch every rank trains on its share of each global
//! batch of a fresh shuffle, prepared ahead by hvd's loader (`hvd::data`); rank 0 prints
//! the epoch's training loss and test accuracy (both over the whole job) and the
//! throughput, and saves the checkpoint at the end.

pub(crate) mod data;
mod model;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{Optimizer, SGD, VarBuilder, VarMap};
use clap::Parser;
use hvd::ProcessSet;
use hvd::candle::{DistributedOptimizer, broadcast_varmap, metrics};
use hvd::data::{Augment, Batch, ElasticSampler, Loader, LoaderOptions};

use data::{Dataset, PIXELS, SIDE, Split};
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

    let Dataset { train, test } = match &args.data {
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

    if train.len() < args.batch {
        return Err(format!(
            "--batch {} is larger than the training set ({} examples): no step could run",
            args.batch,
            train.len()
        )
        .into());
    }
    // Every rank walks the same shuffle in global batches; the loader cuts this rank's
    // share of each step and prepares the next ones on its own thread while this one
    // computes (the pixels are in memory: one thread is plenty).
    let mut sampler = ElasticSampler::new(train.len(), args.batch).seed(Some(args.seed));
    let options = LoaderOptions {
        threads: 1,
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(train.into_source(), Augment::exact(SIDE as u32, 1), options)?;
    let progress = Progress::new(rank == 0);
    let mut summary = None;
    for epoch in 1..=args.epochs {
        sampler.set_epoch(epoch as u64);
        let steps = steps_to_train(&sampler, size);
        let mut batches = loader.epoch(&sampler, rank, size)?;
        let started = Instant::now();
        let (mut loss_sum, mut examples) = (0f64, 0);
        for step in 0..steps {
            let batch = batches
                .next_batch()?
                .ok_or("the loader ended the epoch before its last step")?;
            let (images, labels) = tensors(&batch, &device)?;
            let loss = candle_nn::loss::cross_entropy(&model.forward(&images)?, &labels)?;
            // The ranks' gradients are averaged: weighting each rank's mean loss by its
            // share of the step's examples makes that the step's mean, also in the
            // epoch's last step, whose shares may differ by one.
            let step_examples = sampler.next_global_batch().len();
            let weight = (batch.len() * size) as f64 / step_examples as f64;
            if weight == 1.0 {
                optimizer.backward_step(&loss)?;
            } else {
                optimizer.backward_step(&loss.affine(weight, 0.0)?)?;
            }
            sampler.advance();
            examples += step_examples;
            let loss = loss.to_scalar::<f32>()?;
            loss_sum += f64::from(loss);
            progress.update(epoch, step + 1, steps, loss);
        }
        drop(batches);
        let examples_per_second = examples as f64 / started.elapsed().as_secs_f64();
        progress.clear();

        let loss = metrics::average(&hvd, "loss", loss_sum / steps.max(1) as f64)?;
        let accuracy = test_accuracy(&hvd, &model, &test, &device)?;
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

/// The steps of the sampler's epoch to train: every whole global batch, and the last,
/// shorter one when each rank has a share of it (a rank without one would have no loss
/// to average; those few examples wait for another epoch's shuffle).
fn steps_to_train(sampler: &ElasticSampler, size: usize) -> usize {
    let (whole, rest) = (
        sampler.len() / sampler.global_batch(),
        sampler.len() % sampler.global_batch(),
    );
    whole + usize::from(rest >= size)
}

/// A batch from the loader as candle's `(n, 784)` images and `(n,)` labels.
fn tensors(batch: &Batch, device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let labels: Vec<u32> = batch.labels().iter().map(|&l| l as u32).collect();
    Ok((
        Tensor::from_slice(batch.images(), (batch.len(), PIXELS), device)?,
        Tensor::from_vec(labels, batch.len(), device)?,
    ))
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
