//! `hvd-bench data-gap`: how much throughput real input costs against synthetic input,
//! and whether the job can tell.
//!
//! A JPEG dataset is made (and cached), then one local job per `--np` entry trains with
//! a sleep for compute (a GPU takes no host CPU) and a real allreduce of the gradients,
//! fed three ways in the same job, which take turns in rounds of steps: synthetic
//! batches, PyTorch's `DataLoader` with Pillow (2 workers a rank, prefetch 2; skipped,
//! saying so, without a Python with torch), and hvd's loader. Each mode reports its
//! throughput, the gap to synthetic, the loader's capacity alone (C), the demand
//! (D = ranks × batch / step time), hvd::data_stall's data-bound share, and the share of
//! the step its allreduce took beyond synthetic input's (the input's cost that a job
//! counts as communication, [`result::comm_excess`]); then the measured steps are
//! carried to 32 and 128 ranks by [`cluster`]'s model.

mod cluster;
mod dataset;
mod python;
mod rank;
mod result;
mod torch;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use hvdrun::JobOutcome;

use dataset::DatasetSpec;
use result::{Measured, Mode};

use crate::results_file::ResultsFile;

/// Options of `hvd-bench data-gap`.
#[derive(Debug, Clone, Args)]
pub struct DataGapArgs {
    /// One local job per entry, one after another.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub np: Vec<usize>,
    /// Images in the generated dataset (400-640 × 300-480 JPEGs, quality 90).
    #[arg(long, default_value_t = 3000)]
    pub images: usize,
    /// Images per rank per step.
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// The compute of a step (forward and backward), slept, in milliseconds.
    #[arg(long, default_value_t = 50.0)]
    pub compute_ms: f64,
    /// The gradients' size, allreduced every step (bytes, or 4M, 98M ...). The
    /// allreduce runs on this host's cores, which a GPU's would not take from the
    /// loaders: keep it small next to the compute on a small host.
    #[arg(long, default_value = "4M")]
    pub gradient: String,
    /// Timed steps per mode (and batches timed for the loader's capacity).
    #[arg(long, default_value_t = 40)]
    pub steps: usize,
    /// Steps before timing starts, and before each round of timed steps (the loaders
    /// fill their queues, then drain what they made ahead while other modes ran).
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// hvd's loader's decode threads per rank (default: the host's cores shared between
    /// its ranks).
    #[arg(long)]
    pub threads: Option<usize>,
    /// hvd's decode threads' priority below the training loop: auto (idle until a
    /// tuning finds them behind; the loader's setting for a job whose compute runs on a
    /// GPU, as the slept compute stands in for one), idle (Linux's SCHED_IDLE), or
    /// Linux nice steps 0 to 19 (0: the same; 10 is the loader's own default).
    #[arg(long, default_value = "auto")]
    pub priority: hvd::data::DecodePriority,
    /// PyTorch DataLoader worker processes per rank.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Batches each loader prepares ahead (PyTorch's prefetch_factor, per worker).
    #[arg(long, default_value_t = 2)]
    pub prefetch: usize,
    /// The Python with torch and torchvision for PyTorch's DataLoader (default:
    /// HVD_BENCH_PYTHON, else the python of $HVD_VENV or ~/.cache/hvd-venv, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Leave PyTorch's DataLoader out.
    #[arg(long)]
    pub no_torch: bool,
    /// Where the generated dataset is kept between runs.
    #[arg(long, default_value = "target/data-gap")]
    pub cache: PathBuf,
    /// The seed of the dataset, the shuffles and the augmentation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Rank counts to model past this host.
    #[arg(long, value_delimiter = ',', default_value = "32,128")]
    pub model_ranks: Vec<usize>,
    /// The measured rank count whose steps the model draws from: ranks per host of the
    /// modelled cluster (default: the largest measured, 4 by default, as the Horovod
    /// paper's servers held 4 GPUs).
    #[arg(long)]
    pub model_from: Option<usize>,
    /// Draw the measured and modelled gap against rank count as an SVG figure.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print JSON lines (one per rank count and mode) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// What the launching process tells the ranks of each job.
const RESULTS_ENV: &str = "HVD_BENCH_DATA_GAP_RESULTS";
const ROOT_ENV: &str = "HVD_BENCH_DATA_GAP_ROOT";
const PYTHON_ENV: &str = "HVD_BENCH_DATA_GAP_TORCH";

/// The longest wait for one batch or one answer of a DataLoader process.
const TIMEOUT: Duration = Duration::from_secs(180);

impl DataGapArgs {
    fn gradient_bytes(&self) -> Result<usize, String> {
        hvd::core::units::parse_bytes("--gradient", &self.gradient).map_err(|e| e.to_string())
    }

    /// Checks what can be checked before any rank starts.
    fn validate(&self) -> Result<(), String> {
        let positive = [
            ("--batch-size", self.batch_size),
            ("--steps", self.steps),
            ("--images", self.images),
            ("--workers", self.workers),
            ("--prefetch", self.prefetch),
        ];
        if let Some((name, _)) = positive.iter().find(|p| p.1 == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        if self.np.is_empty() || self.np.contains(&0) {
            return Err("--np takes rank counts of at least 1, such as 1,2,4".into());
        }
        if !(self.compute_ms.is_finite() && self.compute_ms >= 0.0) {
            return Err(format!(
                "--compute-ms must be a time in milliseconds, not {}",
                self.compute_ms
            ));
        }
        // Training takes a warm-up in each of its rounds and the steps of one epoch (the
        // capacity, one warm-up and the steps of the one before).
        let most = self.np.iter().max().copied().unwrap_or(1);
        let steps = rank::ROUNDS * self.warmup + self.steps;
        let needed = steps * most * self.batch_size;
        if needed > self.images {
            return Err(format!(
                "--images {} is too few: {most} ranks × batch {} × {steps} steps (warm-up \
                 included) need {needed} images an epoch",
                self.images, self.batch_size,
            ));
        }
        self.gradient_bytes().map(drop)
    }

    fn plan(&self, root: PathBuf, python: Option<PathBuf>) -> Result<rank::Plan, String> {
        Ok(rank::Plan {
            root,
            python,
            batch: self.batch_size,
            warmup: self.warmup,
            steps: self.steps,
            compute: Duration::from_secs_f64(self.compute_ms / 1e3),
            gradient_elements: self.gradient_bytes()? / 4,
            threads: self.threads,
            priority: self.priority,
            workers: self.workers,
            prefetch: self.prefetch,
            seed: self.seed,
            timeout: TIMEOUT,
        })
    }
}

/// Runs the benchmark: the jobs and the report when started by hand, else this
/// process's rank of a job.
pub fn run(args: &DataGapArgs, launched: bool) -> Result<(), String> {
    args.validate()?;
    if launched {
        return run_rank(args);
    }
    let spec = DatasetSpec {
        images: args.images,
        seed: args.seed,
    };
    if !spec.root(&args.cache).is_dir() {
        eprintln!(
            "# making {} JPEGs in {} (once; later runs reuse them)",
            args.images,
            spec.root(&args.cache).display()
        );
    }
    std::fs::create_dir_all(&args.cache).map_err(|e| format!("{}: {e}", args.cache.display()))?;
    let root = dataset::ensure(spec, &args.cache)?;
    let python = if args.no_torch {
        eprintln!("# PyTorch's DataLoader: left out (--no-torch)");
        None
    } else {
        match torch::check(&torch::candidate(args.python.as_deref())) {
            Ok(python) => Some(python),
            Err(why) => {
                eprintln!("# PyTorch's DataLoader: skipped: {why}");
                None
            }
        }
    };
    let measured = run_jobs(args, &root, python.as_deref())?;
    report(args, &measured)
}

/// One rank: every mode, then rank 0 hands the measurements on.
fn run_rank(args: &DataGapArgs) -> Result<(), String> {
    let root = match std::env::var_os(ROOT_ENV) {
        Some(root) => PathBuf::from(root),
        None => dataset::ensure(
            DatasetSpec {
                images: args.images,
                seed: args.seed,
            },
            &args.cache,
        )?,
    };
    let python = match std::env::var_os(PYTHON_ENV) {
        Some(p) if p.is_empty() => None,
        Some(p) => Some(PathBuf::from(p)),
        None if args.no_torch => None,
        None => torch::check(&torch::candidate(args.python.as_deref())).ok(),
    };
    let hvd = hvd::init().map_err(|e| e.to_string())?;
    let measured = rank::run(&hvd, &args.plan(root, python)?)?;
    let leader = hvd.rank() == 0;
    hvd.shutdown();
    if !leader {
        return Ok(());
    }
    match std::env::var_os(RESULTS_ENV) {
        Some(path) => append(Path::new(&path), &measured),
        None => report(args, &measured),
    }
}

fn append(path: &Path, measured: &[Measured]) -> Result<(), String> {
    use std::io::Write;
    let io = |e: std::io::Error| format!("writing results to {}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io)?;
    for m in measured {
        writeln!(file, "{}", m.to_record()).map_err(io)?;
    }
    Ok(())
}

fn run_jobs(
    args: &DataGapArgs,
    root: &Path,
    python: Option<&Path>,
) -> Result<Vec<Measured>, String> {
    let results = ResultsFile::create("hvd-bench-data-gap", "jsonl")?;
    let python = python.map_or(String::new(), |p| p.display().to_string());
    for &np in &args.np {
        let outcome = crate::this_program_as_job(np)?
            .env(RESULTS_ENV, results.path().display().to_string())
            .env(ROOT_ENV, root.display().to_string())
            .env(PYTHON_ENV, python.clone())
            .run()
            .map_err(|e| e.to_string())?;
        if outcome != JobOutcome::Success {
            return Err(format!("the {np}-rank job failed: {outcome}"));
        }
    }
    results.read()?.lines().map(Measured::from_record).collect()
}

/// The measured table (or JSON lines), the modelled rank counts, and the figure.
fn report(args: &DataGapArgs, measured: &[Measured]) -> Result<(), String> {
    let rows = result::rows(measured)?;
    if args.json {
        for row in &rows {
            println!("{}", result::json_line(row));
        }
    } else {
        println!(
            "# data-gap: batch {} a rank, {} ms compute a step (slept), {} of gradients \
             allreduced, {} timed steps",
            args.batch_size, args.compute_ms, args.gradient, args.steps
        );
        println!("{}", result::header());
        for row in &rows {
            println!("{}", result::table_line(row));
        }
    }
    let series = model(args, measured)?;
    for s in &series {
        let curve: Vec<String> = s
            .modelled
            .iter()
            .map(|(n, g)| format!("{n} ranks {:.1}%", g * 100.0))
            .collect();
        let line = format!("# modelled gap, {}: {}", s.label, curve.join(", "));
        // JSON lines stay alone on standard output.
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    if let Some(path) = &args.plot {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let subtitle = format!(
            "measured on one host of {cores} cores (batch {}, {} ms compute); modelled: hosts \
             like it on 25 GbE",
            args.batch_size, args.compute_ms
        );
        crate::figure::save(path, &cluster::svg(&series, &subtitle)?)?;
        if !args.json {
            println!("# plot: {}", path.display());
        }
    }
    Ok(())
}

/// The modelled curve of each real input mode, from one job's measured steps: a cluster
/// of hosts like this one, each running that job's number of ranks on its own cores.
fn model(args: &DataGapArgs, measured: &[Measured]) -> Result<Vec<cluster::Series>, String> {
    let Some(largest) = measured.iter().map(|m| m.np).max() else {
        return Ok(Vec::new());
    };
    let host = match args.model_from {
        Some(np) if measured.iter().any(|m| m.np == np) => np,
        Some(np) => {
            return Err(format!(
                "--model-from {np}: no job of {np} ranks was measured"
            ));
        }
        None => largest,
    };
    let from = |mode: Mode| measured.iter().find(|m| m.np == host && m.mode == mode);
    let Some(synthetic) = from(Mode::Synthetic) else {
        return Ok(Vec::new());
    };
    // One host, then twice as many hosts at a time, to the largest count asked for.
    let most = args
        .model_ranks
        .iter()
        .copied()
        .max()
        .unwrap_or(host)
        .max(host);
    let mut ranks: Vec<usize> = std::iter::successors(Some(host), |n| n.checked_mul(2))
        .take_while(|&n| n <= most)
        .collect();
    ranks.extend(&args.model_ranks);
    ranks.sort_unstable();
    ranks.dedup();
    let ring = cluster::paper_ring();
    let bytes = args.gradient_bytes()? as f64;
    let rows = result::rows(measured)?;
    let mut series = Vec::new();
    for mode in [Mode::Torch, Mode::Hvd] {
        let Some(real) = from(mode) else { continue };
        series.push(cluster::Series {
            label: match mode {
                Mode::Torch => "PyTorch DataLoader".into(),
                _ => "hvd's loader".into(),
            },
            measured: rows
                .iter()
                .filter(|r| r.mode == mode)
                .map(|r| (r.np, r.gap))
                .collect(),
            modelled: cluster::gaps(
                &synthetic.arrivals,
                cluster::Steps {
                    arrivals: &real.arrivals,
                    comm_excess: real.comm - synthetic.comm,
                },
                &ranks,
                &ring,
                bytes,
            ),
        });
    }
    Ok(series)
}
