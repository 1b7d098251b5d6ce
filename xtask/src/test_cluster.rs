//! `cargo xtask test-cluster`: every test, for every transport this machine can run.

use std::process::Command;

use crate::backends::{self, Availability};
use crate::workspace_root;

fn has_nextest() -> bool {
    Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

pub fn run(extra: &[String]) -> Result<(), String> {
    let root = workspace_root();
    // The candle integration is pure Rust like the default transport: always tested.
    let mut features = vec!["hvd/candle".to_string()];
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for backend in backends::all() {
        match backend.availability(&root) {
            Availability::Ready => {
                features.extend(backend.feature.map(|f| format!("hvd/{f}")));
                ran.push(backend.name);
            }
            Availability::Skipped(why) => skipped.push(format!("{}: {why}", backend.name)),
        }
    }
    println!("test-cluster: testing transports: {}", ran.join(", "));
    for line in &skipped {
        println!("test-cluster: skipping {line}");
    }

    let extra: Vec<&String> = extra.iter().skip_while(|a| *a == "--").collect();
    let mut cargo = Command::new("cargo");
    if has_nextest() {
        cargo.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
    } else {
        println!(
            "test-cluster: cargo-nextest not found, using cargo test (install: cargo install cargo-nextest)"
        );
        cargo.args(["test", "--workspace", "--no-fail-fast"]);
    }
    if !features.is_empty() {
        cargo.args(["--features", &features.join(",")]);
    }
    cargo.args(extra).current_dir(&root);
    let status = cargo
        .status()
        .map_err(|e| format!("could not run cargo: {e}"))?;

    println!("test-cluster: transports tested: {}", ran.join(", "));
    for line in &skipped {
        println!("test-cluster: skipped {line}");
    }
    if status.success() {
        Ok(())
    } else {
        Err(format!("tests failed ({status})"))
    }
}
