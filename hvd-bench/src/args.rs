//! Command-line arguments of hvd-bench.

use clap::{Args, Parser, Subcommand};

use hvd::core::units;

use crate::bench_op::BenchOp;
use crate::synthetic::SyntheticArgs;

/// nccl-tests-style benchmarks of hvd's collectives.
///
/// With `--np N` it launches N local ranks of itself; under a launcher (hvdrun) it reads
/// its rank from the environment. Rank 0 prints one row per size (or JSON lines).
#[derive(Debug, Parser)]
#[command(name = "hvd-bench", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// In-place allreduce of one tensor.
    Allreduce(Sweep),
    /// Allgather: every rank contributes size/np bytes, every rank receives size.
    Allgather(Sweep),
    /// Broadcast of size bytes from rank 0.
    Broadcast(Sweep),
    /// Alltoall: every rank sends size/np bytes to each rank.
    Alltoall(Sweep),
    /// Reducescatter: size bytes in, size/np bytes of the result out on each rank.
    Reducescatter(Sweep),
    /// The runtime's cost on top of the transport: one small cached allreduce, and a
    /// cycle of many small tensors.
    Runtime(RuntimeArgs),
    /// Tensor Fusion: many small tensors through the runtime with fusion on and off, and
    /// the same bytes as one tensor.
    Fusion(FusionArgs),
    /// Autotuning: the step time the tuner settles on, next to a grid search of fixed
    /// fusion thresholds and cycle times, on the fusion workload.
    Autotune(AutotuneArgs),
    /// Horovod's synthetic benchmark: a real model's gradients through the runtime, with
    /// the compute simulated.
    ///
    /// Every rank holds the model's parameter tensors, sleeps through each batch's
    /// forward and backward pass, submits each layer's gradients as the backward pass
    /// reaches them, and waits for all of them. Compute defaults are published
    /// single-GPU speeds: tf_cnn_benchmarks on one Tesla P100, batch size 32, synthetic
    /// data (TensorFlow performance guide, "Benchmarks", May 2017): Inception v3 128
    /// img/sec, ResNet-50 195, ResNet-152 82.7, VGG-16 144; ResNet-101 116, interpolated
    /// by multiply-accumulates. The backward pass takes two thirds of a batch, spread
    /// over the layers by their multiply-accumulates.
    Synthetic(SyntheticArgs),
    /// Fit the alpha-beta cost of ring allreduce to `cargo xtask scaling`'s measurements
    /// on the simulated cluster, predict every measured training run from its gradient
    /// schedule (error in points of efficiency), and the Horovod paper's 128-GPU setups.
    Model(crate::model::ModelArgs),
    /// Draw `cargo xtask bench-peers --json`'s measurements as an SVG figure: bus
    /// bandwidth against message size for hvd and each peer, one panel per rank count.
    Plot(crate::plot::PlotArgs),
    /// How much throughput real JPEG input costs against synthetic input at 1, 2 and 4
    /// ranks (compute slept, gradients allreduced): PyTorch's DataLoader and hvd's
    /// loader, their capacity, the demand, hvd::data_stall's data-bound share, and the
    /// gap modelled at 32 and 128 ranks.
    DataGap(crate::data_gap::DataGapArgs),
}

/// Options of `hvd-bench autotune`.
#[derive(Debug, Clone, Args)]
pub struct AutotuneArgs {
    #[command(flatten)]
    pub workload: FusionArgs,
    /// Interleaved measurements of every point.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
}

/// Options of `hvd-bench fusion`.
#[derive(Debug, Clone, Args)]
pub struct FusionArgs {
    /// Launch this many local ranks (omit under a launcher).
    #[arg(long)]
    pub np: Option<usize>,
    /// Transport to use.
    #[arg(long, default_value = "tcp")]
    pub backend: String,
    /// Tensors per step.
    #[arg(long, default_value_t = 200)]
    pub tensors: usize,
    /// Size of each tensor.
    #[arg(long, default_value = "64K", value_parser = bytes)]
    pub bytes: usize,
    /// Timed steps per variant.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Print JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// Options of `hvd-bench runtime`.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// Launch this many local ranks (omit under a launcher).
    #[arg(long)]
    pub np: Option<usize>,
    /// Transport to use.
    #[arg(long, default_value = "tcp")]
    pub backend: String,
    /// Size of each tensor.
    #[arg(long, default_value = "4K", value_parser = bytes)]
    pub bytes: usize,
    /// Tensors submitted per cycle in the second case.
    #[arg(long, default_value_t = 100)]
    pub tensors: usize,
    /// Iterations of the one-tensor case (a tenth of them for the cycle case).
    #[arg(long, default_value_t = 2000)]
    pub iters: usize,
    /// Print JSON lines.
    #[arg(long)]
    pub json: bool,
}

impl Command {
    /// The sweep of a collective benchmark, with its op; `None` for other commands.
    pub fn sweep(&self) -> Option<(&Sweep, BenchOp)> {
        match self {
            Command::Allreduce(s) => Some((s, BenchOp::Allreduce)),
            Command::Allgather(s) => Some((s, BenchOp::Allgather)),
            Command::Broadcast(s) => Some((s, BenchOp::Broadcast)),
            Command::Alltoall(s) => Some((s, BenchOp::Alltoall)),
            Command::Reducescatter(s) => Some((s, BenchOp::Reducescatter)),
            Command::Runtime(_)
            | Command::Fusion(_)
            | Command::Autotune(_)
            | Command::Synthetic(_)
            | Command::Model(_)
            | Command::Plot(_)
            | Command::DataGap(_) => None,
        }
    }

    /// The number of local ranks to launch, and the transport.
    pub fn launch(&self) -> (Option<usize>, &str) {
        match self {
            Command::Runtime(r) => (r.np, &r.backend),
            Command::Fusion(f) => (f.np, &f.backend),
            Command::Autotune(a) => (a.workload.np, &a.workload.backend),
            _ => self
                .sweep()
                .map_or((None, "tcp"), |(s, _)| (s.np, &s.backend)),
        }
    }
}

/// What to sweep and how to report it.
#[derive(Debug, Clone, Args)]
pub struct Sweep {
    /// Launch this many local ranks (omit under a launcher).
    #[arg(long)]
    pub np: Option<usize>,
    /// Transport to use.
    #[arg(long, default_value = "tcp")]
    pub backend: String,
    /// Smallest size (bytes; 4K, 1M, 64MiB ... accepted).
    #[arg(short = 'b', long = "minbytes", default_value = "4K", value_parser = bytes)]
    pub min_bytes: usize,
    /// Largest size.
    #[arg(short = 'e', long = "maxbytes", default_value = "256M", value_parser = bytes)]
    pub max_bytes: usize,
    /// Multiply the size by this factor between rows.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    pub step_factor: usize,
    /// Exact list of sizes instead of -b/-e/-f, e.g. 4K,1M,256M.
    #[arg(long, value_delimiter = ',', value_parser = bytes)]
    pub sizes: Option<Vec<usize>>,
    /// Element type.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Reduction for allreduce and reducescatter.
    #[arg(long, default_value = "sum")]
    pub op: String,
    /// Timed iterations per size (default: by size, as the peer benchmarks choose).
    #[arg(long)]
    pub iters: Option<usize>,
    /// Untimed iterations before timing.
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Print one JSON object per size instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Verify every result before timing it.
    #[arg(long)]
    pub check: bool,
}

fn bytes(text: &str) -> Result<usize, String> {
    units::parse_bytes("size", text).map_err(|e| e.to_string())
}

impl Sweep {
    /// The sizes to measure, in order.
    pub fn sizes(&self) -> Result<Vec<usize>, String> {
        if let Some(sizes) = &self.sizes {
            return Ok(sizes.clone());
        }
        if self.step_factor < 2 {
            return Err(format!(
                "--stepfactor must be at least 2, got {}",
                self.step_factor
            ));
        }
        if self.min_bytes == 0 || self.min_bytes > self.max_bytes {
            return Err(format!(
                "--minbytes ({}) must be positive and at most --maxbytes ({})",
                self.min_bytes, self.max_bytes
            ));
        }
        let mut sizes = vec![self.min_bytes];
        while let Some(next) = sizes.last().and_then(|s| s.checked_mul(self.step_factor)) {
            if next > self.max_bytes {
                break;
            }
            sizes.push(next);
        }
        Ok(sizes)
    }
}
