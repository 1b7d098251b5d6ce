//! What `bench-torch` and `bench-tf` share: their options, the Python environment they
//! run in, and the comparison itself. hvd's side and the framework's own data
//! parallelism train the same job alternately, `--repeats` times per model; the table
//! shows each side's median examples/s over the last epoch of each run (the first also
//! pays for warming up), hvd's ratio, and both final losses.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::measure::median;
use crate::python;

pub(crate) struct Options {
    pub models: Vec<String>,
    pub np: usize,
    pub epochs: usize,
    pub repeats: usize,
    /// The peers directory, for a command that takes `--peers`.
    pub peers: Option<PathBuf>,
    /// Use the hvd wheel already in the environment instead of building this tree's.
    pub installed: bool,
}

/// The options of `command`; `peers` is the default of `--peers`, `None` where the
/// command has no such flag.
pub(crate) fn options(
    command: &str,
    args: &[String],
    peers: Option<PathBuf>,
) -> Result<Options, String> {
    let mut o = Options {
        models: vec!["mlp".into(), "cnn".into()],
        np: 2,
        epochs: 2,
        repeats: 3,
        peers,
        installed: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{command}: {flag} needs a value"))
        };
        let number = |text: &String| {
            text.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{command}: bad {flag} '{text}' (a positive whole number)"))
        };
        match flag.as_str() {
            "--models" => o.models = value()?.split(',').map(String::from).collect(),
            "--np" => o.np = number(value()?)?,
            "--epochs" => o.epochs = number(value()?)?,
            "--repeats" => o.repeats = number(value()?)?,
            "--peers" if o.peers.is_some() => o.peers = Some(PathBuf::from(value()?)),
            "--installed" => o.installed = true,
            _ => return Err(format!("{command}: unknown flag '{flag}'")),
        }
    }
    if let Some(bad) = o
        .models
        .iter()
        .find(|m| !["mlp", "cnn"].contains(&m.as_str()))
    {
        return Err(format!("{command}: unknown model '{bad}' (mlp or cnn)"));
    }
    Ok(o)
}

/// The environment's python, and a `PATH` that puts its programs (python, hvdrun) first:
/// with this tree's wheel installed unless `--installed`, and with `modules` importable
/// (from `packages`).
pub(crate) fn environment(
    command: &str,
    o: &Options,
    modules: &str,
    packages: &str,
) -> Result<(PathBuf, OsString), String> {
    let venv = python::venv();
    python::ready_with(&venv, modules, packages).map_err(|why| format!("{command}: {why}"))?;
    let path = if o.installed {
        python::path_with(&venv)?
    } else {
        python::install_wheel(&crate::workspace_root(), &venv)?
    };
    Ok((venv.join("bin/python"), path))
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

/// The result line every training benchmark prints last (after a launcher's prefix, if
/// any).
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

/// One side of the comparison: its name in errors, and its command for a model.
pub(crate) struct Side<'a> {
    pub what: &'a str,
    pub command: &'a dyn Fn(&str) -> Command,
}

/// Runs hvd's side and the peer (`label` in the table) alternately and prints the table.
pub(crate) fn compare(
    command: &str,
    o: &Options,
    label: &str,
    hvd: Side,
    peer: Side,
) -> Result<(), String> {
    println!(
        "# {command}: {} ranks, {} epochs per run, {} runs per side, alternating",
        o.np, o.epochs, o.repeats
    );
    println!(
        "# {:<6} {:>14} {:>14} {:>8} {:>10} {:>10}",
        "model",
        "hvd ex/s",
        format!("{} ex/s", label),
        format!("hvd/{}", label),
        "hvd loss",
        format!("{} loss", label)
    );
    for model in &o.models {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..o.repeats {
            ours.push(measure((hvd.command)(model), hvd.what)?);
            theirs.push(measure((peer.command)(model), peer.what)?);
        }
        let rate = |runs: &[Run]| median(&runs.iter().map(|r| r.rate).collect::<Vec<_>>());
        let loss = |runs: &[Run]| median(&runs.iter().map(|r| r.loss).collect::<Vec<_>>());
        // `--repeats` is at least 1, so each side has a median.
        let (a, b) = (
            rate(&ours).unwrap_or(f64::NAN),
            rate(&theirs).unwrap_or(f64::NAN),
        );
        println!(
            "  {model:<6} {a:>14.0} {b:>14.0} {:>7.2}x {:>10.4} {:>10.4}",
            a / b,
            loss(&ours).unwrap_or(f64::NAN),
            loss(&theirs).unwrap_or(f64::NAN),
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

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bad_flags_are_named_after_the_command() {
        let err = |a: &[&str]| {
            options("bench-torch", &args(a), Some(PathBuf::from("peers")))
                .err()
                .unwrap_or_default()
        };
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

    #[test]
    fn peers_is_a_flag_only_where_the_command_has_a_default() {
        let o = options(
            "bench-torch",
            &args(&["--peers", "elsewhere"]),
            Some("p".into()),
        );
        assert_eq!(
            o.ok().and_then(|o| o.peers),
            Some(PathBuf::from("elsewhere"))
        );
        assert_eq!(
            options("bench-tf", &args(&["--peers", "elsewhere"]), None).err(),
            Some("bench-tf: unknown flag '--peers'".to_string())
        );
    }
}
