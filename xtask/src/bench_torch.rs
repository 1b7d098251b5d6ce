//! `cargo xtask bench-torch`: `hvd.torch` next to torch's `DistributedDataParallel` over
//! Gloo on the same training job, in one run.
//!
//! Both sides train the peers directory's MNIST-sized task (`ddp_mlp.py`: the same data,
//! model, seeds, SGD and global batch 64), on local ranks with one thread each; only the
//! gradient exchange differs. hvd's side is `examples/pytorch/bench_mlp.py` under hvdrun,
//! with the wheel built from this tree and installed into `$HVD_VENV`. The two alternate,
//! `--repeats` times per model. The table shows each side's median examples/s over the
//! last epoch of each run (the first also pays for warming up), hvd's ratio, and both
//! final losses. The task's labels are random, so equal losses show that both sides took
//! the same steps, not that either learnt.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::measure::median;
use crate::{python, workspace_root};

struct Options {
    models: Vec<String>,
    np: usize,
    epochs: usize,
    repeats: usize,
    peers: PathBuf,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        models: vec!["mlp".into(), "cnn".into()],
        np: 2,
        epochs: 2,
        repeats: 3,
        peers: workspace_root().join("../shared/peers"),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("bench-torch: {flag} needs a value"))
        };
        let number = |text: &String| {
            text.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    format!("bench-torch: bad {flag} '{text}' (a positive whole number)")
                })
        };
        match flag.as_str() {
            "--models" => o.models = value()?.split(',').map(String::from).collect(),
            "--np" => o.np = number(value()?)?,
            "--epochs" => o.epochs = number(value()?)?,
            "--repeats" => o.repeats = number(value()?)?,
            "--peers" => o.peers = PathBuf::from(value()?),
            _ => return Err(format!("bench-torch: unknown flag '{flag}'")),
        }
    }
    if let Some(bad) = o
        .models
        .iter()
        .find(|m| !["mlp", "cnn"].contains(&m.as_str()))
    {
        return Err(format!("bench-torch: unknown model '{bad}' (mlp or cnn)"));
    }
    Ok(o)
}

/// One training run's result: examples/s and loss of its last epoch.
#[derive(Debug, PartialEq)]
struct Run {
    rate: f64,
    loss: f64,
}

/// The numbers of a JSON list field (`"key": [1, 2.5]`) in a line.
fn numbers(line: &str, key: &str) -> Option<Vec<f64>> {
    let start = line.find(&format!("\"{key}\": ["))? + key.len() + 5;
    let rest = &line[start..];
    rest[..rest.find(']')?]
        .split(',')
        .map(|n| n.trim().parse().ok())
        .collect()
}

/// The result line both benchmarks print last (after a launcher's prefix, if any).
fn parse(output: &str) -> Option<Run> {
    let line = output
        .lines()
        .rev()
        .find(|l| l.contains("\"examples_per_s\""))?;
    Some(Run {
        rate: *numbers(line, "examples_per_s")?.last()?,
        loss: *numbers(line, "loss")?.last()?,
    })
}

fn measure(mut command: Command, what: &str) -> Result<Run, String> {
    let out = command
        .output()
        .map_err(|e| format!("could not run {what}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match parse(&text) {
        Some(run) if out.status.success() => Ok(run),
        _ => Err(format!(
            "{what} failed ({}):\n{text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let o = options(args)?;
    let root = workspace_root();
    let ddp = o.peers.join("ddp_mlp.py");
    if !ddp.exists() {
        return Err(format!(
            "bench-torch: no DDP peer at {} (pass --peers DIR)",
            ddp.display()
        ));
    }
    let venv = python::venv();
    python::ready(&venv).map_err(|why| {
        format!(
            "bench-torch: {why}; make it with: {}",
            python::install_hint(&venv)
        )
    })?;
    let path: OsString = python::install_wheel(&root, &venv)?;
    let python = venv.join("bin/python");
    let (np, epochs) = (o.np.to_string(), o.epochs.to_string());
    println!(
        "# bench-torch: {} ranks, {} epochs per run, {} runs per side, alternating",
        o.np, o.epochs, o.repeats
    );
    println!(
        "# {:<6} {:>14} {:>14} {:>8} {:>10} {:>10}",
        "model", "hvd ex/s", "DDP ex/s", "hvd/DDP", "hvd loss", "DDP loss"
    );
    for model in &o.models {
        let (mut hvd, mut peer) = (Vec::new(), Vec::new());
        for _ in 0..o.repeats {
            let mut ours = Command::new(venv.join("bin/hvdrun"));
            ours.args(["-np", &np])
                .arg(&python)
                .arg(root.join("examples/pytorch/bench_mlp.py"))
                .args(["--epochs", &epochs, "--model", model])
                .env("PATH", &path);
            hvd.push(measure(ours, "hvd.torch's bench_mlp.py")?);
            let mut theirs = Command::new(&python);
            theirs
                .arg(&ddp)
                .args(["--world", &np, "--epochs", &epochs, "--model", model])
                .env("PATH", &path);
            peer.push(measure(theirs, "the DDP peer")?);
        }
        let rate = |runs: &[Run]| median(&runs.iter().map(|r| r.rate).collect::<Vec<_>>());
        let loss = |runs: &[Run]| median(&runs.iter().map(|r| r.loss).collect::<Vec<_>>());
        // `--repeats` is at least 1, so each side has a median.
        let (ours, theirs) = (
            rate(&hvd).unwrap_or(f64::NAN),
            rate(&peer).unwrap_or(f64::NAN),
        );
        println!(
            "  {model:<6} {ours:>14.0} {theirs:>14.0} {:>7.2}x {:>10.4} {:>10.4}",
            ours / theirs,
            loss(&hvd).unwrap_or(f64::NAN),
            loss(&peer).unwrap_or(f64::NAN),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_last_epoch_of_either_sides_result_line() {
        let hvd = "[0]<stdout>: epoch 1/2  loss 2.3040\n\
                   [0]<stdout>: {\"peer\": \"hvd-torch\", \"model\": \"mlp\", \"world\": 2, \
                   \"examples_per_s\": [52898, 50904], \"loss\": [2.304, 2.3028]}\n";
        assert_eq!(
            parse(hvd),
            Some(Run {
                rate: 50904.0,
                loss: 2.3028
            })
        );
        let ddp = "{\"peer\": \"ddp-gloo\", \"examples_per_s\": [15170], \"loss\": [2.304]}";
        assert_eq!(
            parse(ddp),
            Some(Run {
                rate: 15170.0,
                loss: 2.304
            })
        );
        assert_eq!(parse("epoch 1/2 loss 2.3\n"), None);
        assert_eq!(
            parse("{\"examples_per_s\": [12, oops], \"loss\": [1]}"),
            None
        );
    }

    #[test]
    fn bad_flags_are_named() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let err = |a: &[&str]| options(&args(a)).err().unwrap_or_default();
        assert_eq!(
            err(&["--models", "mlp,resnet"]),
            "bench-torch: unknown model 'resnet' (mlp or cnn)"
        );
        assert_eq!(
            err(&["--repeats", "0"]),
            "bench-torch: bad --repeats '0' (a positive whole number)"
        );
        assert_eq!(err(&["--fast"]), "bench-torch: unknown flag '--fast'");
        assert_eq!(err(&["--np"]), "bench-torch: --np needs a value");
    }
}
