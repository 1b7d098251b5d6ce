//! `hvdrun --check-build` and `hvdrun --check`: what this build can do, and whether the
//! hosts can run a job together, before a real job finds out the hard way.

use std::process::Stdio;
use std::time::{Duration, Instant};

use hvd::Backend;
use hvdrun::{Host, Job, JobOutcome};

use crate::cli::Cli;

/// Every transport hvd has, and the Cargo feature of the `hvd` crate that builds it in.
const TRANSPORTS: [(&str, &str); 5] = [
    ("tcp", "gloo-tcp"),
    ("shm", "shm"),
    ("mpi", "mpi"),
    ("nccl", "nccl"),
    ("rdma", "rdma"),
];

/// The transports compiled in, with the library each uses, and those left out.
pub fn build_report() -> String {
    let mut out = format!("hvd {}\n", env!("CARGO_PKG_VERSION"));
    let compiled = Backend::compiled();
    out.push_str("transports compiled in:\n");
    for backend in &compiled {
        let library = backend
            .library()
            .unwrap_or_else(|e| format!("library unavailable: {e}"));
        out.push_str(&format!("  {:<5} {library}\n", backend.name()));
    }
    let missing: Vec<&(&str, &str)> = TRANSPORTS
        .iter()
        .filter(|(name, _)| !compiled.iter().any(|b| b.name() == *name))
        .collect();
    if !missing.is_empty() {
        out.push_str("not compiled in:\n");
        for (name, feature) in missing {
            out.push_str(&format!(
                "  {name:<5} build with --features hvd/{feature}\n"
            ));
        }
    }
    out.push_str(&format!(
        "default transport here: {}\n",
        Backend::from_env().map_or_else(|e| format!("none ({e})"), |b| b.to_string())
    ));
    out
}

/// How long the ssh check of one host may take.
const SSH_CHECK: Duration = Duration::from_secs(20);

/// Checks ssh to every other host, then runs one probe per host (this program with
/// `--probe`) that reports each host's interface and TCP reachability between hosts.
pub fn hosts(cli: &Cli) -> Result<(), String> {
    let hosts = crate::hosts(cli)?.unwrap_or_else(|| {
        vec![Host {
            name: "localhost".into(),
            slots: 1,
        }]
    });
    println!("hvdrun: checking {} host(s)", hosts.len());
    let ssh = crate::ssh(cli);
    let mut unreachable = Vec::new();
    for host in &hosts {
        if host.is_this_machine() {
            println!("  ssh  {:<20} this machine, started directly", host.name);
            continue;
        }
        let started = Instant::now();
        match run_with_timeout(ssh.remote(&host.name, "true"), SSH_CHECK) {
            Ok(()) => println!(
                "  ssh  {:<20} ok ({:.2}s)",
                host.name,
                started.elapsed().as_secs_f64()
            ),
            Err(why) => {
                println!("  ssh  {:<20} FAILED: {why}", host.name);
                unreachable.push(host.name.clone());
            }
        }
    }
    if !unreachable.is_empty() {
        return Err(format!(
            "cannot log in to {} over ssh without a password; fix that first (ssh-copy-id, -p PORT, -i KEY)",
            unreachable.join(", ")
        ));
    }
    let program = std::env::current_exe()
        .map_err(|e| format!("cannot find hvdrun's own path for the probes: {e}"))?;
    let one_each: Vec<Host> = hosts
        .iter()
        .map(|h| Host {
            name: h.name.clone(),
            slots: 1,
        })
        .collect();
    let mut probes = Job::new(program, vec!["--probe".into()], one_each.len())
        .hosts(one_each)
        .ssh(ssh)
        .grace(Duration::from_secs(2));
    if let Some(names) = &cli.network_interface {
        probes = probes.network_interface(names);
    }
    match probes.run().map_err(|e| e.to_string())? {
        JobOutcome::Success => {
            println!("hvdrun: ok: every host can reach every other");
            Ok(())
        }
        other => Err(format!("the check failed: {other}")),
    }
}

/// Runs `command` quietly; its last line of stderr is the error.
fn run_with_timeout(mut command: std::process::Command, timeout: Duration) -> Result<(), String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run ssh: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
                }
                let last = err.lines().rev().find(|l| !l.trim().is_empty());
                return Err(last.map_or_else(|| status.to_string(), str::to_string));
            }
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {}s", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
}
