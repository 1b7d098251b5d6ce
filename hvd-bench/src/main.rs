//! hvd-bench: nccl-tests-style benchmarks of hvd's collectives and runtime.
//!
//! ```text
//! hvd-bench allreduce --np 2 -b 4K -e 256M -f 4 --check
//! hvd-bench allgather --np 4 --sizes 64M --json
//! hvd-bench runtime --np 2
//! hvd-bench synthetic --model resnet101 --np 1,2,4 --fusion on,off
//! hvd-bench data-gap --np 1,2,4 --json
//! hvd-bench plot --input bench-peers.jsonl --output bench-peers.svg
//! ```

mod args;
mod autotune;
mod bench_op;
mod buffers;
mod data_gap;
mod device;
mod figure;
mod fusion;
mod jsonl;
mod measure;
mod model;
mod plot;
mod report;
mod results_file;
mod runtime;
mod synthetic;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use hvd::{Backend, Collective, DType, ReduceOp, Reduction, transport};
use hvdrun::{Job, JobOutcome};

use args::{Cli, Command, Sweep};
use bench_op::BenchOp;
use measure::{Plan, measure};

/// The median of a benchmark's measurements, which are never empty.
fn median(values: &[f64]) -> f64 {
    hvd_core::summary::median(values).unwrap_or(f64::NAN)
}

fn main() -> ExitCode {
    if let Err(e) = hvd::logging::install() {
        eprintln!("hvd-bench: {e}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("hvd-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<ExitCode, String> {
    let launched =
        std::env::var_os("HVD_RANK").is_some() || std::env::var_os("HOROVOD_RANK").is_some();
    if let Command::Model(args) = &cli.command {
        return model::run(args).map(|()| ExitCode::SUCCESS);
    }
    if let Command::Plot(args) = &cli.command {
        return plot::run(args).map(|()| ExitCode::SUCCESS);
    }
    if let Command::DataGap(args) = &cli.command {
        return data_gap::run(args, launched).map(|()| ExitCode::SUCCESS);
    }
    if let Command::Synthetic(args) = &cli.command {
        return synthetic::run(args, launched).map(|()| ExitCode::SUCCESS);
    }
    let (np, backend) = cli.command.launch();
    if let (Some(np), false) = (np, launched) {
        return launch(np);
    }
    let backend: Backend = backend.parse().map_err(|e: hvd::Error| e.to_string())?;
    let world = transport::world(backend).map_err(|e| e.to_string())?;
    let host = backend.host(&world).map_err(|e| e.to_string())?;
    if let Some(np) = np
        && np != world.size
    {
        return Err(format!(
            "--np {np} disagrees with the launcher's job size {}",
            world.size
        ));
    }
    let group: Arc<dyn Collective> =
        Arc::from(transport::connect(host, &world).map_err(|e| e.to_string())?);
    let device = device::connect(backend, &world, group.topology()).map_err(|e| e.to_string())?;
    let host_only = |what: &str| {
        format!(
            "the {what} benchmark runs host tensors: run it with a host transport, not {backend}"
        )
    };
    let wrong = match &cli.command {
        Command::Runtime(_) if device.is_some() => return Err(host_only("runtime")),
        Command::Autotune(_) if device.is_some() => return Err(host_only("autotune")),
        Command::Runtime(r) => {
            runtime::run(group, r.bytes, r.tensors, r.iters, r.json).map(|()| false)
        }
        Command::Fusion(f) => {
            fusion::run(group, device, f.tensors, f.bytes, f.iters, f.json).map(|()| false)
        }
        Command::Autotune(a) => {
            let f = &a.workload;
            autotune::run(group, f.tensors, f.bytes, f.iters, a.repeats).map(|()| false)
        }
        command => match command.sweep() {
            Some((sweep, op)) => {
                // Device tensors go to the device transport, the timings over the host one.
                let (group, memory): (Arc<dyn Collective>, _) = match device {
                    Some(d) => (
                        Arc::new(hvd::runtime::Router::new(group).with(d.collective)),
                        Some(d.memory),
                    ),
                    None => (group, None),
                };
                sweep_sizes(group.as_ref(), backend, sweep, op, memory)
            }
            None => Ok(false),
        },
    }
    .map_err(|e| e.to_string())?;
    if wrong {
        return Err("some results were wrong (see the messages above)".into());
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts `np` ranks of this same command and waits for them.
/// A job of `np` ranks of this program with its own arguments: the ranks see the
/// launcher's variables and run the benchmark themselves.
fn this_program_as_job(np: usize) -> Result<Job, String> {
    let program = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    Ok(Job::new(program, args, np).handle_interrupts())
}

fn launch(np: usize) -> Result<ExitCode, String> {
    if np == 0 {
        return Err("--np must be at least 1".into());
    }
    match this_program_as_job(np)?.run().map_err(|e| e.to_string())? {
        JobOutcome::Success => Ok(ExitCode::SUCCESS),
        failed => Err(failed.to_string()),
    }
}

/// Runs a size sweep of one collective as one rank of a job; returns whether any result
/// was wrong.
fn sweep_sizes(
    group: &dyn Collective,
    backend: Backend,
    sweep: &Sweep,
    op: BenchOp,
    memory: Option<Arc<dyn hvd::core::DeviceMemory>>,
) -> hvd::Result<bool> {
    let sizes = sweep.sizes().map_err(|reason| hvd::Error::Config {
        name: "sizes (-b/-e/-f)".into(),
        value: format!(
            "{}..{} x{}",
            sweep.min_bytes, sweep.max_bytes, sweep.step_factor
        ),
        expected: reason,
    })?;
    let dtype: DType = sweep.dtype.parse()?;
    let reduce: ReduceOp = sweep.op.parse()?;
    let plan = Plan {
        op,
        dtype,
        reduction: Reduction::new(reduce),
        iters: sweep.iters,
        warmup: sweep.warmup,
        check: sweep.check,
        memory,
    };
    let (rank, np) = (group.topology().rank(), group.topology().size());
    if rank == 0 && !sweep.json {
        println!(
            "{}",
            report::header(op.name(), backend.name(), np, reduce.name())
        );
    }
    let mut wrong = false;
    for bytes in sizes {
        let row = measure(group, &plan, bytes)?;
        wrong |= row.checked == Some(false);
        if rank == 0 {
            let line = if sweep.json {
                report::json_row(&row, backend.name())
            } else {
                report::table_row(&row)
            };
            println!("{line}");
        }
    }
    Ok(wrong)
}
