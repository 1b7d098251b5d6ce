//! `cargo xtask train`: the README's first command. Builds the launcher and the
//! train_mnist example (release, feature `candle`) and trains on N local ranks over the
//! default transport.

use std::path::PathBuf;
use std::process::Command;

use crate::workspace_root;

const DEFAULT_RANKS: usize = 2;

/// Where cargo puts release builds: `CARGO_TARGET_DIR`, or the workspace's `target`.
fn release_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("release")
}

/// `[--np N] [-- <train_mnist arguments>]`
fn parse(args: &[String]) -> Result<(usize, Vec<String>), String> {
    let (ours, theirs) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], args[i + 1..].to_vec()),
        None => (args, Vec::new()),
    };
    match ours {
        [] => Ok((DEFAULT_RANKS, theirs)),
        [flag, n] if flag == "--np" => match n.parse::<usize>() {
            Ok(np) if np > 0 => Ok((np, theirs)),
            _ => Err(format!(
                "--np needs a number of ranks (1 or more), not '{n}'"
            )),
        },
        other => Err(format!(
            "unexpected arguments {other:?}; usage: cargo xtask train [--np N] [-- <train_mnist arguments>]"
        )),
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let (np, example_args) = parse(args)?;
    let root = workspace_root();
    println!("train: building hvdrun and the train_mnist example (release)");
    let built = Command::new("cargo")
        .args(["build", "--release", "--quiet", "--features", "hvd/candle"])
        .args(["-p", "hvdrun", "--bin", "hvdrun"])
        .args(["-p", "hvd", "--example", "train_mnist"])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if !built.success() {
        return Err(format!("the build failed ({built})"));
    }

    let release = release_dir();
    // hvdrun runs in the workspace, so a path inside it can be shown and passed relative.
    let checkpoint = release.join("train_mnist.safetensors");
    let checkpoint = checkpoint.strip_prefix(&root).unwrap_or(&checkpoint);
    let mut hvdrun = Command::new(release.join("hvdrun"));
    hvdrun.args(["-np", &np.to_string()]);
    // Each rank computes with its share of the cores rather than all ranks with all of them.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        hvdrun.args(["-x", &format!("RAYON_NUM_THREADS={}", (cores / np).max(1))]);
    }
    hvdrun
        .arg(release.join("examples").join("train_mnist"))
        .args(["--checkpoint", &checkpoint.to_string_lossy()])
        .args(&example_args);
    println!("train: {}", describe(&hvdrun));
    let status = hvdrun
        .current_dir(&root)
        .status()
        .map_err(|e| format!("could not start hvdrun: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the training job failed ({status})"))
    }
}

/// The command line, with paths relative to the workspace where they are inside it.
fn describe(command: &Command) -> String {
    let root = workspace_root();
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| {
            let part = PathBuf::from(part);
            part.strip_prefix(&root)
                .unwrap_or(&part)
                .display()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn ranks_and_example_arguments_are_split_at_the_double_dash() {
        assert_eq!(parse(&[]).unwrap(), (2, vec![]));
        assert_eq!(
            parse(&strings(&["--np", "4", "--", "--epochs", "1"])).unwrap(),
            (4, strings(&["--epochs", "1"]))
        );
        assert_eq!(
            parse(&strings(&["--", "--lr", "0.2"])).unwrap(),
            (2, strings(&["--lr", "0.2"]))
        );
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert_eq!(
            parse(&strings(&["--np", "0"])).unwrap_err(),
            "--np needs a number of ranks (1 or more), not '0'"
        );
        assert!(
            parse(&strings(&["--epochs", "1"]))
                .unwrap_err()
                .starts_with(
                    "unexpected arguments [\"--epochs\", \"1\"]; usage: cargo xtask train"
                )
        );
    }
}
