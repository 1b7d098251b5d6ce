//! `hvd-bench model`: a cost model of data-parallel training, fitted to the simulated
//! cluster's measurements (`cargo xtask scaling`) and checked against them and against
//! the Horovod paper.
//!
//! - [`ring`]: the alpha-beta cost of a ring allreduce, fitted per link speed to the
//!   measured `hvd-bench allreduce` times.
//! - [`schedule`]: one batch, simulated: the backward pass releases each layer's
//!   gradients as `hvd-bench synthetic` does, the runtime sends what is ready as fused
//!   allreduces, and what they fail to hide behind the compute lengthens the batch.
//!
//! It predicts every measured synthetic run (error in points of efficiency), then the
//! paper's setups: 128 P100s on 25 GbE.

mod plot;
pub(crate) mod ring;
mod schedule;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hvd::Compression;

use crate::figure;
use crate::jsonl::{self, Record};
use crate::synthetic::compute::{ComputePlan, p100_seconds_per_image};
use crate::synthetic::models::{Architecture, Model};
use ring::Ring;
use schedule::{Batch, Runtime};

/// Options of `hvd-bench model`.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// The folder `cargo xtask scaling` wrote (allreduce.jsonl, synthetic.jsonl).
    #[arg(long, default_value = "target/scaling")]
    pub measurements: PathBuf,
    /// Where to draw predicted against measured efficiency, as an SVG figure.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// Negotiation before each fused allreduce, in ring steps of latency (one small
/// allgather of every rank's requests).
const NEGOTIATION_STEPS: f64 = 2.0;

/// The simulated P100 batch: 32 images, as `hvd-bench synthetic` runs it.
const BATCH: usize = 32;

/// A link speed and a rank count.
type Setup = (String, usize);

/// The ring costs of each link speed and rank count, fitted to its allreduce
/// measurements. Per rank count, because on the simulated cluster the ranks share this
/// host's few cores: a step's latency grows with their number, as it would not on
/// hosts of their own.
fn fit_rings(rows: &[Record]) -> Result<BTreeMap<Setup, Ring>, String> {
    let mut points: BTreeMap<Setup, Vec<(usize, f64, f64)>> = BTreeMap::new();
    for row in rows {
        let n = row.count("np")?;
        points
            .entry((row.text("link")?.to_string(), n))
            .or_default()
            .push((n, row.number("bytes")?, row.number("time_us_median")? / 1e6));
    }
    points
        .into_iter()
        .map(|((link, n), p)| {
            Ring::fit(&p)
                .map(|ring| ((link.clone(), n), ring))
                .ok_or_else(|| {
                    format!("too few allreduce sizes measured on {link} with {n} ranks to fit")
                })
        })
        .collect()
}

/// One batch of `model` on the wire as `compression` sends it, with `compute` seconds of
/// compute.
fn batch(model: &Model, compute: f64, compression: Compression) -> Batch {
    let plan = ComputePlan::new(model, std::time::Duration::from_secs_f64(compute));
    let forward = plan.forward.as_secs_f64();
    let per_element = match compression {
        Compression::None => 4.0,
        _ => 2.0,
    };
    let gradients = plan
        .releases
        .iter()
        .map(|&(layer, ready)| {
            let elements: usize = model.layers[layer]
                .params
                .iter()
                .map(|p| p.elements())
                .sum();
            (forward + ready.as_secs_f64(), elements as f64 * per_element)
        })
        .filter(|g| g.1 > 0.0)
        .collect();
    Batch { compute, gradients }
}

fn runtime(fusion: &str, per_byte: f64) -> Runtime {
    let fusion_threshold = match fusion {
        "off" => 0.0,
        "on" => (128u64 << 20) as f64,
        other => hvd::core::units::parse_bytes("fusion", other).map_or(0.0, |b| b as f64),
    };
    Runtime {
        fusion_threshold,
        negotiation_steps: NEGOTIATION_STEPS,
        per_byte,
    }
}

/// One measured training run, and the model's prediction of it.
struct Check {
    link: String,
    hosts: usize,
    model: Architecture,
    fusion: String,
    compression: Compression,
    batch: Batch,
    measured: f64,
    predicted: f64,
}

fn read_runs(rows: &[Record]) -> Result<Vec<Check>, String> {
    let mut runs = Vec::new();
    for row in rows {
        let name = row.text("model")?;
        let architecture = Architecture::from_str(name, true)
            .map_err(|_| row.error(format_args!("a model hvd-bench does not know, {name:?}")))?;
        let compression: Compression = row
            .text("compression")?
            .parse()
            .map_err(|e: hvd::Error| row.error(e))?;
        let compute = row.number("compute_ms")? / 1e3;
        let Some(measured) = row.field("compute_efficiency")?.as_f64() else {
            continue;
        };
        runs.push(Check {
            link: row.text("link")?.into(),
            hosts: row.count("np")?,
            model: architecture,
            fusion: row.text("fusion")?.into(),
            compression,
            batch: batch(&architecture.build(), compute, compression),
            measured,
            predicted: 0.0,
        });
    }
    Ok(runs)
}

/// Predicts `runs` with the rings of their setups and the runtime's cost per byte;
/// returns the sum of squared relative errors in batch time.
fn predict(runs: &mut [&mut Check], rings: &BTreeMap<Setup, Ring>, per_byte: f64) -> f64 {
    let mut squares = 0.0;
    for run in runs.iter_mut() {
        let Some(ring) = rings.get(&(run.link.clone(), run.hosts)) else {
            continue;
        };
        run.predicted = run
            .batch
            .efficiency(ring, run.hosts, runtime(&run.fusion, per_byte));
        squares += (run.measured / run.predicted - 1.0).powi(2);
    }
    squares
}

/// The runtime's cost per byte on each link: the one value (0 to 100 ns, by 0.1 ns)
/// that predicts that link's training runs best.
fn fit_per_byte(
    runs: &mut [Check],
    rings: &BTreeMap<Setup, Ring>,
) -> Result<BTreeMap<String, f64>, String> {
    if let Some(run) = runs
        .iter()
        .find(|r| !rings.contains_key(&(r.link.clone(), r.hosts)))
    {
        return Err(format!(
            "no allreduce measurements on {} with {} ranks",
            run.link, run.hosts
        ));
    }
    let links: BTreeSet<String> = runs.iter().map(|r| r.link.clone()).collect();
    let mut fitted = BTreeMap::new();
    for link in links {
        let mut on_link: Vec<&mut Check> = runs.iter_mut().filter(|r| r.link == link).collect();
        let best = (0..=1000)
            .map(|tenths| f64::from(tenths) * 1e-10)
            .map(|rho| (predict(&mut on_link, rings, rho), rho))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(0.0, |(_, rho)| rho);
        predict(&mut on_link, rings, best);
        fitted.insert(link, best);
    }
    Ok(fitted)
}

/// The paper's setups: 128 P100s, a flat ring on 25 GbE (four GPUs a server: one of
/// every four ring hops crosses a NIC, each NIC carrying one hop each way).
fn paper(tcp_wire_share: f64) -> Vec<String> {
    let link = 25e9;
    // Latency of a step: a 25 GbE round of TCP through the kernel, and of RDMA verbs.
    let tcp = Ring {
        alpha: 25e-6,
        beta: ring::wire_beta(link) / tcp_wire_share,
    };
    let rdma = Ring {
        alpha: 5e-6,
        beta: ring::wire_beta(link) / 0.95,
    };
    let mut lines = vec![format!(
        "# the paper's setups: 128 P100s, batch {BATCH}, 25 GbE; TCP at {:.0}% of the wire \
         (as fitted on the simulated cluster), alpha 25 us; RDMA at 95%, alpha 5 us",
        tcp_wire_share * 100.0
    )];
    // A GPU's copies and casts run at hundreds of GB/s: nothing next to 25 GbE.
    let on = runtime("on", 0.0);
    for (architecture, paper_says) in [
        (Architecture::Resnet101, "88% (TCP)"),
        (Architecture::Inception3, "88% (TCP)"),
        (Architecture::Vgg16, "RDMA +30% over TCP"),
    ] {
        let model = architecture.build();
        let compute = p100_seconds_per_image(architecture) * BATCH as f64;
        let b = batch(&model, compute, Compression::None);
        let (e_tcp, e_rdma) = (b.efficiency(&tcp, 128, on), b.efficiency(&rdma, 128, on));
        lines.push(format!(
            "  {:<11} predicted {:>5.1}% on TCP, {:>5.1}% on RDMA (RDMA {:+.0}%)   paper: {paper_says}",
            architecture.name(),
            e_tcp * 100.0,
            e_rdma * 100.0,
            (e_rdma / e_tcp - 1.0) * 100.0
        ));
    }
    lines
}

/// Runs `hvd-bench model`.
pub fn run(args: &ModelArgs) -> Result<(), String> {
    let dir = &args.measurements;
    let rings = fit_rings(&jsonl::read(&dir.join("allreduce.jsonl"))?)?;
    println!(
        "# ring allreduce costs fitted per link and rank count: t = 2(n-1) alpha + 2(n-1)/n S beta"
    );
    let mut wire_shares = Vec::new();
    for ((link, n), r) in &rings {
        let share = ring::parse_rate(link).map(|rate| ring::wire_beta(rate) / r.beta);
        if let Some(s) = share {
            wire_shares.push(s);
        }
        println!(
            "  {link:<9} {n:>3} ranks  alpha {:>8.1} us  beta {:.3} ns/byte ({:.2} Gbit/s{})",
            r.alpha * 1e6,
            r.beta * 1e9,
            8.0 / r.beta / 1e9,
            share.map_or(String::new(), |s| format!(
                ", {:.0}% of the link",
                s * 100.0
            ))
        );
    }
    let mut checks = read_runs(&jsonl::read(&dir.join("synthetic.jsonl"))?)?;
    let per_byte = fit_per_byte(&mut checks, &rings)?;
    for (link, rho) in &per_byte {
        println!(
            "  {link:<9} training adds {:.1} ns per byte on the wire (fitted to its runs: \
             fusion copies, casts, thread hand-offs, ranks sharing this host's cores)",
            rho * 1e9
        );
    }
    println!(
        "# {:<9} {:>5} {:<11} {:<6} {:<8} {:>9} {:>10} {:>7}",
        "link", "hosts", "model", "fusion", "compress", "measured", "predicted", "error"
    );
    let mut worst: f64 = 0.0;
    for c in &checks {
        let error = (c.predicted - c.measured) * 100.0;
        worst = worst.max(error.abs());
        println!(
            "  {:<9} {:>5} {:<11} {:<6} {:<8} {:>8.1}% {:>9.1}% {:>+6.1}pt",
            c.link,
            c.hosts,
            c.model.name(),
            c.fusion,
            c.compression.name(),
            c.measured * 100.0,
            c.predicted * 100.0,
            error
        );
    }
    println!(
        "# {} runs predicted; largest error {worst:.1} points",
        checks.len()
    );
    let share = if wire_shares.is_empty() {
        0.9
    } else {
        wire_shares.iter().sum::<f64>() / wire_shares.len() as f64
    };
    for line in paper(share.min(1.0)) {
        println!("{line}");
    }
    if let Some(path) = &args.plot {
        let points: Vec<plot::Point> = checks
            .iter()
            .map(|c| plot::Point {
                measured: c.measured,
                predicted: c.predicted,
                model: c.model,
            })
            .collect();
        figure::save(path, &plot::svg(&points)?)?;
        println!("# plot: {}", path.display());
    }
    Ok(())
}
