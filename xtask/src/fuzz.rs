//! `cargo xtask fuzz`: every fuzz target of `fuzz/` for a while each, starting from its
//! kept corpus (so every input that ever found new code is tried again first).
//! Needs cargo-fuzz; libFuzzer's instrumentation wants nightly flags, which a stable
//! toolchain accepts under RUSTC_BOOTSTRAP for this build only.

use std::process::Command;

use crate::workspace_root;

/// The targets, as named in `fuzz/Cargo.toml`.
const TARGETS: [&str; 5] = [
    "negotiation",
    "rendezvous",
    "tcp_frame",
    "tcp_handshake",
    "timeline",
];

struct Options {
    seconds: u64,
    runs: Option<u64>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        seconds: 12,
        runs: None,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag} takes a whole number, not '{value}'"))
        };
        match flag.as_str() {
            "--seconds" => options.seconds = number()?,
            "--runs" => options.runs = Some(number()?),
            other => return Err(format!("unknown fuzz option '{other}'")),
        }
    }
    Ok(options)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    let installed = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        return Err("cargo-fuzz is not installed (cargo install cargo-fuzz --locked)".into());
    }
    let dir = workspace_root().join("fuzz");
    for target in TARGETS {
        let limit = match options.runs {
            Some(runs) => format!("-runs={runs}"),
            None => format!("-max_total_time={}", options.seconds),
        };
        // libFuzzer adds what it finds to the first corpus: a campaign (--runs) grows the
        // kept one; a short run reads it and writes to a scratch directory.
        let mut corpora = vec![format!("corpus/{target}")];
        if options.runs.is_none() {
            let scratch = format!("target/new-corpus/{target}");
            std::fs::create_dir_all(dir.join(&scratch))
                .map_err(|e| format!("creating fuzz/{scratch}: {e}"))?;
            corpora.insert(0, scratch);
        }
        println!("fuzz: {target} ({limit})");
        let status = Command::new("cargo")
            .args(["fuzz", "run", "-s", "none", "--release", target])
            .args(&corpora)
            .arg("--")
            .args([
                limit.as_str(),
                "-use_value_profile=1",
                "-print_final_stats=1",
            ])
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(&dir)
            .status()
            .map_err(|e| format!("could not run cargo fuzz: {e}"))?;
        if !status.success() {
            return Err(format!(
                "fuzz target {target} failed ({status}); the input is in fuzz/artifacts/{target}/"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_is_declared_and_bad_options_are_named() {
        let manifest = std::fs::read_to_string(workspace_root().join("fuzz/Cargo.toml")).unwrap();
        for target in TARGETS {
            assert!(
                manifest.contains(&format!("name = \"{target}\"")),
                "{target}"
            );
        }
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse(&args(&["--seconds", "soon"])).err().unwrap(),
            "--seconds takes a whole number, not 'soon'"
        );
        assert_eq!(
            parse(&args(&["--runs"])).err().unwrap(),
            "--runs needs a value"
        );
        assert_eq!(parse(&args(&["--runs", "5"])).unwrap().runs, Some(5));
    }
}
