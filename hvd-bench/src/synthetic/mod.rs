//! `hvd-bench synthetic`: the counterpart of Horovod's pytorch_synthetic_benchmark.
//!
//! Every rank holds the real parameter tensors of a model (ResNet-50/101/152, VGG-16,
//! Inception v3, built from their torchvision definitions), simulates each batch's
//! forward and backward pass by sleeping for a compute time taken from published GPU
//! throughput, submits each layer's gradients to the runtime as the backward pass
//! reaches them (reverse layer order, `allreduce_async`, average), and waits for all of
//! them before the next batch, as Horovod's DistributedOptimizer does. What is measured
//! is how much of the compute the communication (negotiation, Tensor Fusion, transport)
//! fails to hide: img/sec per rank, total img/sec, and scaling efficiency against the
//! 1-rank job of the same run (`--np 1,2,4`).

pub(crate) mod compute;
pub(crate) mod models;
mod options;
mod rank;
mod report;
mod sweep;

use std::io::Write;
use std::sync::Arc;

use hvd::{Backend, Collective, transport};

pub use options::SyntheticArgs;

use compute::ComputePlan;
use options::Settings;
use report::Setup;

/// Where a launching `hvd-bench synthetic --np 1,2,4` asks each job's rank 0 to append
/// its measurements.
const RESULTS_ENV: &str = "HVD_BENCH_SYNTHETIC_RESULTS";

/// Runs the benchmark: one job per `--np` entry when not started by a launcher, else
/// this process's rank of the job.
pub fn run(args: &SyntheticArgs, launched: bool) -> Result<(), String> {
    let settings = args.validate()?;
    let backend: Backend = args
        .backend
        .parse()
        .map_err(|e: hvd::Error| e.to_string())?;
    let model = args.model.build();
    let plan = ComputePlan::new(&model, compute::batch_compute(args)?);
    let setup = Setup {
        model: &model,
        batch_size: args.batch_size,
        plan: &plan,
    };
    match (&args.np, launched) {
        (Some(nps), false) => sweep::run(&setup, nps, args.json),
        _ => run_rank(&settings, &setup, backend).map_err(|e| e.to_string()),
    }
}

/// One rank: every fusion and compression setting over one connection; rank 0 reports.
fn run_rank(settings: &Settings, setup: &Setup<'_>, backend: Backend) -> hvd::Result<()> {
    let args = &settings.args;
    let world = transport::world(backend)?;
    if let Some(nps) = &args.np
        && !nps.contains(&world.size)
    {
        return Err(hvd::Error::Config {
            name: "--np".into(),
            value: format!("{nps:?}"),
            expected: format!("a list holding the launcher's job size {}", world.size),
        });
    }
    let transport: Arc<dyn Collective> = Arc::from(transport::connect(backend, &world)?);
    let leader = world.rank == 0;
    let text = leader && !args.json;
    if text {
        println!("{}", setup.header());
    }
    let mut all = Vec::with_capacity(settings.fusion.len() * settings.compression.len());
    for fusion in &settings.fusion {
        for &compression in &settings.compression {
            let measured = rank::measure(
                transport.clone(),
                settings,
                setup.model,
                setup.plan,
                fusion,
                compression,
            )?;
            if text {
                println!("{}", setup.measurement(&measured));
            }
            all.push(measured);
        }
    }
    if !leader {
        return Ok(());
    }
    match std::env::var_os(RESULTS_ENV) {
        Some(path) => append_records(std::path::Path::new(&path), &all),
        None => {
            println!("{}", setup.summary(&all, args.json));
            Ok(())
        }
    }
}

fn append_records(path: &std::path::Path, all: &[report::Measurement]) -> hvd::Result<()> {
    let io =
        |e: std::io::Error| hvd::Error::io(format!("writing results to {}", path.display()), &e);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io)?;
    for m in all {
        writeln!(file, "{}", m.to_record()).map_err(io)?;
    }
    Ok(())
}
