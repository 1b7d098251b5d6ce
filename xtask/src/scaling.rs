//! `cargo xtask scaling`: how hvd scales when the network is the bottleneck, measured
//! on the simulated cluster (one rank per host, links shaped to `--links`, compute
//! dilated by `--compute-scale` so that compute against link speed matches a P100 on
//! 25 GbE at 25x and 1 Gbit/s).
//!
//! For each link speed it builds the cluster, then for each host count measures the
//! ring allreduce (`hvd-bench allreduce`, for the cost model's fit) and each model's
//! training throughput (`hvd-bench synthetic`, fusion and compression as asked). Every
//! result is a JSON line with the link and host count in front, appended to
//! `<out>/allreduce.jsonl` and `<out>/synthetic.jsonl`; `hvd-bench model` reads them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::{self, Cluster, Spec};
use crate::{interrupt, workspace_root};

struct Options {
    hosts: Vec<usize>,
    links: Vec<String>,
    models: Vec<String>,
    compute_scale: String,
    fusion: String,
    compression: String,
    iters: usize,
    sizes: String,
    out: PathBuf,
}

fn list(text: &str) -> Vec<String> {
    text.split(',').map(|s| s.trim().to_string()).collect()
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        hosts: vec![2, 4, 8],
        links: list("1gbit,2500mbit"),
        models: list("resnet101,inception3,vgg16"),
        compute_scale: "25".into(),
        fusion: "on,off".into(),
        compression: "none".into(),
        iters: 3,
        sizes: "64K,1M,16M,64M".into(),
        out: workspace_root().join("target/scaling"),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--hosts" => {
                o.hosts = list(&value()?)
                    .iter()
                    .map(|n| match n.parse::<usize>() {
                        Ok(n) if n >= 1 => Ok(n),
                        _ => Err(format!(
                            "--hosts takes host counts such as 2,4,8, got {n:?}"
                        )),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--links" => o.links = list(&value()?),
            "--models" => o.models = list(&value()?),
            "--compute-scale" => o.compute_scale = value()?,
            "--fusion" => o.fusion = value()?,
            "--compression" => o.compression = value()?,
            "--iters" => {
                o.iters = value()?
                    .parse()
                    .map_err(|_| "--iters takes a whole number".to_string())?
            }
            "--sizes" => o.sizes = value()?,
            "--out" => o.out = PathBuf::from(value()?),
            other => return Err(format!("scaling: unknown option {other:?}")),
        }
    }
    Ok(o)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    if let Some(why) = cluster::unavailable() {
        return Err(format!("the simulated cluster cannot be built here: {why}"));
    }
    let root = workspace_root();
    let status = Command::new("cargo")
        .args(["build", "--release", "-p", "hvdrun", "-p", "hvd-bench"])
        .args(["--bin", "hvdrun", "--bin", "hvd-bench"])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err("building hvdrun and hvd-bench failed".into());
    }
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    interrupt::catch();
    let most = o.hosts.iter().copied().max().unwrap_or(1);
    for link in &o.links {
        let cluster = Cluster::create(Spec {
            hosts: most,
            ranks_per_host: 1,
            link: link.clone(),
        })?;
        println!("scaling: {}", cluster.summary());
        for &hosts in &o.hosts {
            measure(&root, &cluster, &o, link, hosts)?;
            if interrupt::interrupted() {
                return Err("interrupted; the simulated cluster was removed".into());
            }
        }
    }
    println!(
        "scaling: results in {}; `hvd-bench model --measurements {}` fits and predicts",
        o.out.display(),
        o.out.display()
    );
    Ok(())
}

/// The allreduce sweep and every model's training run on the first `hosts` hosts.
fn measure(
    root: &Path,
    cluster: &Cluster,
    o: &Options,
    link: &str,
    hosts: usize,
) -> Result<(), String> {
    let prefix = format!("{{\"link\":\"{link}\",\"hosts\":{hosts},");
    let sweep = ["allreduce", "--sizes", &o.sizes, "--json"].map(String::from);
    let lines = job(root, cluster, hosts, &sweep)?;
    append(&o.out.join("allreduce.jsonl"), &prefix, &lines)?;
    for model in &o.models {
        let iters = o.iters.to_string();
        let args = [
            "synthetic",
            "--model",
            model,
            "--compute-scale",
            &o.compute_scale,
            "--fusion",
            &o.fusion,
            "--compression",
            &o.compression,
            "--warmup",
            "1",
            "--batches-per-iter",
            "1",
            "--iters",
            &iters,
            "--json",
        ]
        .map(String::from);
        let lines = job(root, cluster, hosts, &args)?;
        for line in &lines {
            println!("scaling: {link} {hosts} hosts: {line}");
        }
        append(&o.out.join("synthetic.jsonl"), &prefix, &lines)?;
    }
    Ok(())
}

/// Runs hvd-bench with `args` on one rank per host of the first `hosts` hosts; returns
/// the JSON lines rank 0 printed.
fn job(
    root: &Path,
    cluster: &Cluster,
    hosts: usize,
    args: &[String],
) -> Result<Vec<String>, String> {
    let release = root.join("target/release");
    let host_list: Vec<String> = cluster.hosts[..hosts]
        .iter()
        .map(|h| format!("{}:1", h.address))
        .collect();
    let out = Command::new(release.join("hvdrun"))
        .args(cluster.hvdrun_args())
        .args(["-np", &hosts.to_string(), "-H", &host_list.join(",")])
        .arg(release.join("hvd-bench"))
        .args(args)
        .output()
        .map_err(|e| format!("hvdrun: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "hvd-bench {} on {hosts} hosts failed:\n{}{}",
            args.join(" "),
            stdout,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(stdout
        .lines()
        .filter_map(|l| l.find('{').map(|at| l[at..].to_string()))
        .collect())
}

fn append(path: &Path, prefix: &str, lines: &[String]) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for line in lines {
        let rest = line.strip_prefix('{').unwrap_or(line);
        writeln!(file, "{prefix}{rest}").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
