//! `cargo xtask test-cluster`: every test, for every transport this machine can run.

use std::process::Command;

use crate::backends::{self, Availability};
use crate::python;
use crate::requirements;
use crate::workspace_root;

fn has_nextest() -> bool {
    Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs, when this process is root, the packages of every requirement and
/// transport that is missing, so that nothing is skipped for want of them.
fn install_missing(root: &std::path::Path) {
    let mut packages: Vec<&str> = Vec::new();
    for requirement in requirements::all() {
        if !(requirement.present)() {
            packages.extend(requirement.packages);
        }
    }
    for backend in backends::all() {
        let present = root.join(backend.crate_dir).join("Cargo.toml").exists();
        if present && matches!(backend.availability(root), Availability::Skipped(_)) {
            packages.extend(backend.packages);
        }
    }
    packages.sort_unstable();
    packages.dedup();
    if !packages.is_empty() && !requirements::apt_install(&packages) && requirements::is_root() {
        println!("test-cluster: could not install {}", packages.join(" "));
    }
}

/// The summary lines for tests skipped for want of something, with how to provide it.
fn skipped_tests() -> Vec<String> {
    requirements::all()
        .iter()
        .filter(|r| !(r.present)())
        .map(|r| {
            format!(
                "{} tests that need {} (install: {})",
                requirements::gated_tests(r.cfg),
                r.what,
                r.install()
            )
        })
        .collect()
}

pub fn run(extra: &[String]) -> Result<(), String> {
    let root = workspace_root();
    install_missing(&root);
    // The candle integration is pure Rust like the default transport: always tested.
    let mut features = vec!["hvd/candle".to_string()];
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for backend in backends::all() {
        match backend.availability(&root) {
            Availability::Ready => {
                // The facade builds the transport in; the launcher's and the
                // benchmark's tests of it follow the feature of their own crate.
                if let Some(f) = backend.feature {
                    features.extend(["hvd", "hvdrun", "hvd-bench"].map(|c| format!("{c}/{f}")));
                }
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
    let python = python_tests(&root);

    println!("test-cluster: transports tested: {}", ran.join(", "));
    for line in &skipped {
        println!("test-cluster: skipped {line}");
    }
    let tests = skipped_tests();
    if tests.is_empty() {
        println!("test-cluster: no test skipped for want of a system tool");
    }
    for line in tests {
        println!("test-cluster: skipped {line}");
    }
    if let Err(PythonTests::Skipped(line)) = &python {
        println!("test-cluster: skipped {line}");
    }
    match (status.success(), python) {
        (true, Ok(()) | Err(PythonTests::Skipped(_))) => Ok(()),
        (true, Err(PythonTests::Failed(e))) => Err(e),
        (false, Err(PythonTests::Failed(e))) => Err(format!("tests failed ({status}); {e}")),
        (false, _) => Err(format!("tests failed ({status})")),
    }
}

enum PythonTests {
    Skipped(String),
    Failed(String),
}

/// The Python front's pytest jobs, when their environment is present. Under CI a missing
/// environment is a failure, as for the system tools.
fn python_tests(root: &std::path::Path) -> Result<(), PythonTests> {
    let venv = python::venv();
    if let Err(why) = python::ready(&venv) {
        let line = format!(
            "the Python front's tests (hvd-python): {why} (install: {})",
            python::install_hint(&venv)
        );
        if std::env::var_os("CI").is_some() {
            return Err(PythonTests::Failed(line));
        }
        println!("test-cluster: skipping {line}");
        return Err(PythonTests::Skipped(line));
    }
    println!(
        "test-cluster: the Python front's tests, in {}",
        venv.display()
    );
    python::test(root, &venv).map_err(PythonTests::Failed)
}
