//! `hvd-bench plot`: the figure of a `cargo xtask bench-peers --json` run, bus bandwidth
//! against message size for hvd and each peer, one panel per rank count.
//!
//! - [`input`]: the run's JSON lines, one median time per collective, rank count, size
//!   and implementation, turned into bus bandwidth series.
//! - [`bandwidth`]: the figure.

mod bandwidth;
mod input;

use std::path::PathBuf;

use clap::Args;

use crate::bench_op::BenchOp;
use crate::figure;

/// Options of `hvd-bench plot`.
#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// JSON lines written by `cargo xtask bench-peers --json FILE`.
    #[arg(long)]
    pub input: PathBuf,
    /// Where to write the figure, as SVG.
    #[arg(long)]
    pub output: PathBuf,
    /// The collective to draw.
    #[arg(long, value_enum, default_value_t = BenchOp::Allreduce)]
    pub collective: BenchOp,
}

/// Runs `hvd-bench plot`.
pub fn run(args: &PlotArgs) -> Result<(), String> {
    let figure = input::Figure::read(&args.input, args.collective)?;
    figure::save(&args.output, &bandwidth::svg(&figure)?)?;
    println!(
        "# plot: {} ({} panels, {} series)",
        args.output.display(),
        figure.panels.len(),
        figure.implementations.len()
    );
    Ok(())
}
