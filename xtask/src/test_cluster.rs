//! `cargo xtask test-cluster`: every test, for every transport this machine can run.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::backends::{self, Availability};
use crate::cluster::{self, Cluster, Spec};
use crate::interrupt;
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

/// The options of `cargo xtask test-cluster`.
#[derive(Debug)]
struct Options {
    cluster: Spec,
    /// Only tests whose name contains this.
    filter: Option<String>,
    /// Only the simulated cluster's tests.
    cluster_only: bool,
    /// Passed on to the test runner.
    extra: Vec<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            cluster: Spec {
                hosts: 4,
                ranks_per_host: 2,
                link: "10gbit".into(),
            },
            filter: None,
            cluster_only: false,
            extra: Vec::new(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value"))
            };
            let count = |name: &str, text: String| {
                text.parse::<usize>()
                    .map_err(|_| format!("{name} takes a whole number, got {text:?}"))
            };
            match arg.as_str() {
                "--hosts" => options.cluster.hosts = count("--hosts", value("--hosts")?)?,
                "--ranks-per-host" => {
                    options.cluster.ranks_per_host =
                        count("--ranks-per-host", value("--ranks-per-host")?)?
                }
                "--link" => options.cluster.link = parse_rate(&value("--link")?)?,
                "--filter" => options.filter = Some(value("--filter")?),
                "--cluster-only" => options.cluster_only = true,
                "--" => {
                    options.extra = args.cloned().collect();
                    break;
                }
                other => return Err(format!("test-cluster: unknown option {other:?}")),
            }
        }
        Ok(options)
    }
}

/// A `tc` rate: a number with bit, kbit, mbit or gbit (`10gbit`, `500mbit`).
fn parse_rate(text: &str) -> Result<String, String> {
    let lower = text.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &lower[digits.len()..];
    let number_ok = digits.parse::<f64>().is_ok_and(|n| n > 0.0);
    if number_ok && ["bit", "kbit", "mbit", "gbit"].contains(&unit) {
        Ok(lower)
    } else {
        Err(format!(
            "--link takes a rate such as 10gbit, 1gbit or 500mbit, got {text:?}"
        ))
    }
}

/// A test run's outcome, the runner's closing count line, and each test's verdict
/// (nextest's `PASS`/`FAIL` lines, as `PASS name`).
struct Run {
    passed: bool,
    counts: Option<String>,
    verdicts: Vec<String>,
}

/// Runs `command`, showing its output as it comes, and keeps the runner's summary line.
fn run_tests(command: &mut Command) -> Result<Run, String> {
    let mut child = command
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    let mut counts = None;
    let mut verdicts = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if line.contains("tests run:") || line.starts_with("test result:") {
                counts = Some(line.trim().to_string());
            }
            // `        PASS [   2.258s] (1/7) hvdrun::cluster a_hosts_ranks_killed_...`
            let words: Vec<&str> = line.split_whitespace().collect();
            if let (Some(&verdict @ ("PASS" | "FAIL")), Some(name)) = (words.first(), words.last())
                && line.contains("] (")
            {
                // nextest repeats each failure at the end.
                let verdict = format!("{verdict} {name}");
                if !verdicts.contains(&verdict) {
                    verdicts.push(verdict);
                }
            }
        }
    }
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    Ok(Run {
        passed: status.success(),
        counts,
        verdicts,
    })
}

/// cargo nextest (or cargo test) with the features and filters of this run.
fn test_command(root: &Path, features: &[String]) -> Command {
    let mut cargo = Command::new("cargo");
    if has_nextest() {
        cargo.args(["nextest", "run", "--no-fail-fast"]);
    } else {
        cargo.args(["test", "--no-fail-fast"]);
    }
    cargo.args(["--features", &features.join(",")]);
    cargo.current_dir(root);
    cargo
}

pub fn run(args: &[String]) -> Result<(), String> {
    let options = Options::parse(args)?;
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
    if !has_nextest() {
        println!(
            "test-cluster: cargo-nextest not found, using cargo test (install: cargo install cargo-nextest)"
        );
    }

    let python_env = PythonEnv::prepare(&root);
    let one_host = if options.cluster_only {
        Run {
            passed: true,
            counts: Some("not run (--cluster-only)".into()),
            verdicts: Vec::new(),
        }
    } else {
        let mut command = test_command(&root, &features);
        command.arg("--workspace");
        if let Some(filter) = &options.filter {
            command.arg(filter);
        }
        command.args(&options.extra);
        run_tests(&mut command)?
    };
    let cluster = if ran.contains(&"tcp") {
        cluster_tests(&root, &features, &options, &python_env)
    } else {
        ClusterTests::Skipped("the TCP transport, which crosses hosts, is not built".into())
    };
    let python = if options.cluster_only {
        Ok(())
    } else {
        python_env.test(&root)
    };

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
    if let Some(counts) = &one_host.counts {
        println!("test-cluster: one host: {counts}");
    }
    let mut failures = Vec::new();
    if !one_host.passed {
        failures.push("tests on one host failed".to_string());
    }
    match cluster {
        ClusterTests::Ran { summary, run } => {
            println!("test-cluster: simulated cluster: {summary}");
            for verdict in &run.verdicts {
                println!("test-cluster: simulated cluster: {verdict}");
            }
            if let Some(counts) = &run.counts {
                println!("test-cluster: simulated cluster: {counts}");
            }
            if !run.passed {
                failures.push("tests on the simulated cluster failed".into());
            }
        }
        ClusterTests::Skipped(why) => {
            println!("test-cluster: skipped the simulated cluster: {why}");
            if std::env::var_os("CI").is_some() {
                failures.push(format!("CI must run the simulated cluster: {why}"));
            }
        }
        ClusterTests::Failed(why) => failures.push(why),
    }
    if let PythonEnv::Skipped(line) = &python_env {
        println!("test-cluster: skipped {line}");
    }
    if let Err(e) = python {
        failures.push(e);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

enum ClusterTests {
    Ran { summary: String, run: Run },
    Skipped(String),
    Failed(String),
}

/// Builds the simulated cluster, runs the tests of `hvdrun/tests/cluster.rs` and
/// `hvdrun/tests/elastic_cluster.rs` across it one at a time (some cut its links), and
/// tears it down, also after Ctrl-C.
fn cluster_tests(
    root: &Path,
    features: &[String],
    options: &Options,
    python: &PythonEnv,
) -> ClusterTests {
    if let Some(why) = cluster::unavailable() {
        return ClusterTests::Skipped(why);
    }
    interrupt::catch();
    let built = Cluster::create(options.cluster.clone());
    let cluster = match built {
        Ok(cluster) => cluster,
        Err(why) => {
            cluster::remove_leftovers();
            return ClusterTests::Failed(format!("could not build the simulated cluster: {why}"));
        }
    };
    let summary = cluster.summary();
    println!("test-cluster: simulated cluster up: {summary}");
    let mut command;
    if has_nextest() {
        // The workspace as built for the one-host tests, so nothing is rebuilt; the
        // helpers every rank runs are named `*_rank`; one test at a time.
        command = test_command(root, features);
        command.args([
            "--workspace",
            "--run-ignored",
            "only",
            "--test-threads",
            "1",
        ]);
        command.args([
            "-E",
            "(binary(=cluster) | binary(=elastic_cluster)) & not test(/_rank$/)",
        ]);
        if let Some(filter) = &options.filter {
            command.arg(filter);
        }
        command.args(&options.extra);
    } else {
        let own: Vec<String> = features
            .iter()
            .filter(|f| f.starts_with("hvd/") || f.starts_with("hvdrun/"))
            .cloned()
            .collect();
        command = test_command(root, &own);
        command.args([
            "-p",
            "hvdrun",
            "--test",
            "cluster",
            "--test",
            "elastic_cluster",
        ]);
        command.args(["--", "--ignored", "--skip", "_rank", "--test-threads=1"]);
        if let Some(filter) = &options.filter {
            command.arg(filter);
        }
    }
    command.env("HVD_TEST_CLUSTER", &cluster.description);
    let run = run_tests(&mut command).map(|mut run| {
        // Python's elastic scenarios, on the same hosts (their `cluster` parameter).
        if let PythonEnv::Ready(installed) = python {
            println!("test-cluster: the Python front's elastic scenarios on the cluster");
            // -s shows each scenario's MEASURED time.
            let tests = ["hvd-python/tests/test_elastic.py", "-s", "-k", "cluster"];
            let env = [("HVD_TEST_CLUSTER", cluster.description.as_path())];
            if let Err(why) = installed.pytest(root, &tests, &env) {
                run.verdicts.push(why);
                run.passed = false;
            }
        }
        run
    });
    drop(cluster);
    if interrupt::interrupted() {
        return ClusterTests::Failed("interrupted; the simulated cluster was removed".into());
    }
    match run {
        Ok(run) => ClusterTests::Ran { summary, run },
        Err(why) => ClusterTests::Failed(why),
    }
}

/// The Python environment the Python tests run in, or why they cannot.
enum PythonEnv {
    Ready(python::Installed),
    Skipped(String),
    Failed(String),
}

impl PythonEnv {
    /// The environment, made first when it is missing, with this tree's wheel. When it
    /// cannot be made, under CI that is a failure, as for the system tools.
    fn prepare(root: &Path) -> PythonEnv {
        let venv = python::venv();
        if let Err(why) = python::ready(&venv).or_else(|_| python::make(&venv)) {
            let line = format!(
                "the Python front's tests (hvd-python): {why} (install: {})",
                python::install_hint(&venv)
            );
            if std::env::var_os("CI").is_some() {
                return PythonEnv::Failed(line);
            }
            println!("test-cluster: skipping {line}");
            return PythonEnv::Skipped(line);
        }
        match python::Installed::new(root, &venv) {
            Ok(installed) => PythonEnv::Ready(installed),
            Err(why) => PythonEnv::Failed(why),
        }
    }

    /// The Python front's pytest jobs on this host (the simulated cluster's are run by
    /// `cluster_tests`).
    fn test(&self, root: &Path) -> Result<(), String> {
        match self {
            PythonEnv::Ready(installed) => {
                println!(
                    "test-cluster: the Python front's tests, in {}",
                    installed.venv.display()
                );
                installed.pytest(root, &["hvd-python/tests"], &[])
            }
            PythonEnv::Skipped(_) => Ok(()),
            PythonEnv::Failed(why) => Err(why.clone()),
        }
    }
}
