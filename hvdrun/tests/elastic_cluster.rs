//! Elastic jobs across the simulated cluster of `cargo xtask test-cluster` (hosts as
//! network namespaces, reached by hvdrun over ssh), running the regression of
//! `common/regression.rs`: hosts killed, a link cut, hosts added and removed by a
//! discovery script, a host that fails whenever it joins, the limits. For every
//! scenario: the outcome, what hvdrun said, every example exactly once per epoch, the
//! weights of one process within 1e-9, the recovery time, and no process left on any
//! host. Ignored in a plain test run; xtask runs them one at a time with the cluster up.

#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/regression.rs"]
mod regression;

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use cluster::Cluster;

const HVDRUN: &str = env!("CARGO_BIN_EXE_hvdrun");

#[test]
#[ignore = "a worker of the elastic jobs the other tests of this file launch"]
fn elastic_rank() {
    regression::worker();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// hvdrun with the cluster's options, `args`, and this binary's worker writing into
/// `out` with `fault`, each step taking `step_ms`.
fn hvdrun(cluster: &Cluster, args: &[&str], out: &Path, fault: &str, step_ms: u64) -> Command {
    let mut command = cluster.hvdrun(HVDRUN);
    command.args(args);
    for var in [
        format!("ELASTIC_OUT={}", out.display()),
        format!("ELASTIC_FAULT={fault}"),
        format!("ELASTIC_STEP_MS={step_ms}"),
        "HVD_TIMEOUT=3".into(),
    ] {
        command.args(["-x", &var]);
    }
    command
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args([
            "elastic_rank",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ]);
    command
}

/// The cluster's hosts with two slots each, as `-H`.
fn all_hosts(cluster: &Cluster) -> String {
    cluster.hosts_arg(cluster.hosts.len(), 2)
}

fn address(cluster: &Cluster, index: usize) -> String {
    cluster.hosts[index].address.to_string()
}

/// Stops hvdrun (which stops its workers) and fails the test with `why`, the rounds the
/// workers started and what hvdrun said.
fn give_up(child: &mut std::process::Child, out: &Path, why: &str) -> ! {
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let said = child
        .stderr
        .take()
        .map(|e| std::io::read_to_string(e).unwrap_or_default())
        .unwrap_or_default();
    let _ = child.wait();
    let rounds = regression::lines(out, "rounds");
    panic!("{why}; rounds: {rounds:?}; hvdrun said:\n{said}");
}

/// Waits for `count` starts of a worker in a round, giving up after a minute.
fn wait_for_starts(child: &mut std::process::Child, out: &Path, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while regression::lines(out, "rounds").len() < count {
        if Instant::now() > deadline {
            give_up(
                child,
                out,
                &format!("fewer than {count} workers started within 60 s"),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Milliseconds at which each worker of round `round` started training in it.
fn round_starts(out: &Path, round: u64) -> Vec<u128> {
    regression::lines(out, "rounds")
        .iter()
        .filter(|l| l.split(' ').next() == Some(&round.to_string()))
        .map(|l| l.split(' ').nth(1).unwrap().parse().unwrap())
        .collect()
}

fn round_size(out: &Path, round: u64) -> Option<usize> {
    regression::lines(out, "rounds")
        .iter()
        .find(|l| l.split(' ').next() == Some(&round.to_string()))
        .map(|l| l.split(' ').nth(2).unwrap().parse().unwrap())
}

/// When the first worker that killed itself did.
fn killed_at(out: &Path) -> u128 {
    regression::lines(out, "events")
        .iter()
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .min()
        .expect("a worker killed itself")
}

/// Reports a measured time on the test's stderr, past libtest's capture of `println!`:
/// shown when the test fails, and with `--no-capture`.
fn measured(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "MEASURED {line}");
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Fails the test while any host still runs one of this binary's workers, after
/// letting stragglers finish for a few seconds.
fn assert_no_worker_left(cluster: &Cluster) {
    let exe = std::env::current_exe().unwrap().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left = Vec::new();
        for host in &cluster.hosts {
            let pids = Command::new("ip")
                .args(["netns", "pids", &host.namespace])
                .output()
                .unwrap();
            for pid in text(&pids.stdout).split_whitespace() {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                if text(&cmdline).contains(&exe) {
                    left.push(format!("{} pid {pid}", host.address));
                }
            }
        }
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "workers left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The hosts hvdrun charged with a failure, in its words.
fn charged(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| {
            let (before, _) = l.split_once(" is kept out for ")?;
            Some(before.rsplit(' ').next()?.to_owned())
        })
        .collect()
}

fn finish(cluster: &Cluster, out: &Output) -> String {
    assert_no_worker_left(cluster);
    text(&out.stderr)
}

/// Starts a job whose discovery script lists `hosts` (their slots), with `--min-np`
/// `min_np` and steps of 40 ms, and waits until every slot has started training.
fn discovered(cluster: &Cluster, out: &Path, hosts: &[usize], min_np: usize) -> Child {
    let script = discovery(out, &listed(cluster, hosts));
    let min_np = min_np.to_string();
    let args = ["--host-discovery-script", &script, "--min-np", &min_np];
    let mut child = hvdrun(cluster, &args, out, "", 40)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_starts(&mut child, out, 2 * hosts.len());
    child
}

/// Runs an elastic job over every host (`--min-np 2`) through `fault`, which it must
/// survive: exit 0, the weights of one process, every example once per epoch. Returns
/// what hvdrun printed on stderr.
fn survives(cluster: &Cluster, out: &Path, fault: &str) -> String {
    let args = ["--elastic", "-H", &all_hosts(cluster), "--min-np", "2"];
    let (run, stderr) = run_to_end(cluster, &args, out, fault, 20);
    assert!(run.status.success(), "{stderr}");
    regression::check_final(out);
    stderr
}

/// Runs [`hvdrun`] to its end; how it ended and what it printed on stderr, once no
/// worker is left on any host.
fn run_to_end(
    cluster: &Cluster,
    args: &[&str],
    out: &Path,
    fault: &str,
    step_ms: u64,
) -> (Output, String) {
    let run = hvdrun(cluster, args, out, fault, step_ms).output().unwrap();
    let stderr = finish(cluster, &run);
    (run, stderr)
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_killed_host_shrinks_the_job_which_goes_on_from_its_last_commit() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let victim = address(&cluster, 2);
    let stderr = survives(&cluster, out.path(), &format!("kill-host:{victim}:10"));
    assert_eq!(round_size(out.path(), 2), Some(6), "{stderr}");
    let recovered = round_starts(out.path(), 2).into_iter().max().unwrap() - killed_at(out.path());
    measured(&format!(
        "killed host: round 2 trained {recovered} ms after the kill"
    ));
    assert!(
        recovered < 3500,
        "first step of round 2 {recovered} ms after the kill"
    );
    assert_eq!(charged(&stderr), std::slice::from_ref(&victim), "{stderr}");
    assert!(
        stderr.contains(&format!("on host {victim} failed first (")),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn one_killed_rank_removes_its_whole_host_and_charges_no_other() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let victim = address(&cluster, 1);
    let fault = format!("kill-slot:{victim}:1:10");
    let stderr = survives(&cluster, out.path(), &fault);
    assert_eq!(round_size(out.path(), 2), Some(6), "{stderr}");
    let second: Vec<String> = regression::lines(out.path(), "rounds")
        .into_iter()
        .filter(|l| l.starts_with("2 "))
        .collect();
    assert!(
        second.iter().all(|l| !l.contains(&format!(" {victim}:"))),
        "no worker of {victim} in round 2: {second:?}"
    );
    assert_eq!(charged(&stderr), [victim], "{stderr}");
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_cut_link_is_recovered_from_and_its_host_never_returns() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let cut = cluster.last_host();
    let victim = cut.host.address.to_string();
    let args = ["--elastic", "-H", &all_hosts(&cluster), "--min-np", "2"];
    let mut child = hvdrun(&cluster, &args, out.path(), "", 40)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_starts(&mut child, out.path(), 8);
    std::thread::sleep(Duration::from_millis(300));
    let cut_at = now_ms();
    cut.host.set_link(false);
    while round_starts(out.path(), 2).len() < 6 && now_ms() - cut_at < 30_000 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let recovered = now_ms() - cut_at;
    cut.host.set_link(true);
    if round_starts(out.path(), 2).len() < 6 {
        give_up(&mut child, out.path(), "no round 2 within 30 s of the cut");
    }
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    let status = child.wait().unwrap();
    assert_no_worker_left(&cluster);
    assert!(status.success(), "{stderr}");
    measured(&format!(
        "cut link: round 2 trained {recovered} ms after the cut"
    ));
    assert!(
        recovered < 7000,
        "round 2 began {recovered} ms after the cut"
    );
    regression::check_final(out.path());
    let later: Vec<String> = regression::lines(out.path(), "rounds")
        .into_iter()
        .filter(|l| !l.starts_with("1 ") && l.contains(&format!(" {victim}:")))
        .collect();
    assert!(
        later.is_empty(),
        "the cut host joined a later round: {later:?}"
    );
    assert_eq!(charged(&stderr), [victim], "{stderr}");
}

/// A discovery script over a file the test rewrites.
fn discovery(out: &Path, hosts: &[String]) -> String {
    let listing = out.join("hosts");
    std::fs::write(&listing, hosts.join("\n") + "\n").unwrap();
    let script = out.join("discover.sh");
    std::fs::write(&script, format!("#!/bin/sh\ncat {}\n", listing.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script.display().to_string()
}

fn listed(cluster: &Cluster, hosts: &[usize]) -> Vec<String> {
    hosts
        .iter()
        .map(|h| format!("{}:2", address(cluster, *h)))
        .collect()
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_discovered_host_joins_at_the_next_commit_and_nothing_is_rolled_back() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let mut child = discovered(&cluster, out.path(), &[0, 1, 2], 2);
    let added_at = now_ms();
    std::fs::write(
        out.path().join("hosts"),
        listed(&cluster, &[0, 1, 2, 3]).join("\n") + "\n",
    )
    .unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(child.wait().unwrap().success(), "{stderr}");
    assert_no_worker_left(&cluster);
    let done = regression::check_final(out.path());
    assert_eq!(round_size(out.path(), 2), Some(8), "{stderr}");
    let grew = round_starts(out.path(), 2).into_iter().max().unwrap() - added_at;
    // A discovery interval, a commit (4 steps of 40 ms) and 3 s.
    measured(&format!(
        "added host: round 2 of 8 trained {grew} ms after it was listed"
    ));
    assert!(
        grew < 1000 + 160 + 3000,
        "grew {grew} ms after the host was listed"
    );
    let executed = worker_steps(out.path(), "0:0.0");
    assert_eq!(executed, done.steps, "nothing rolled back");
    assert!(charged(&stderr).is_empty(), "{stderr}");
}

/// Steps the worker whose key ends in `suffix` executed.
fn worker_steps(out: &Path, suffix: &str) -> u64 {
    regression::lines(out, "workers")
        .iter()
        .find(|w| w.split(' ').next().is_some_and(|k| k.ends_with(suffix)))
        .and_then(|w| w.rsplit(' ').next()?.parse().ok())
        .expect("the worker reported")
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_host_removed_by_discovery_leaves_at_the_next_commit_and_is_not_charged() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let mut child = discovered(&cluster, out.path(), &[0, 1, 2, 3], 2);
    std::fs::write(
        out.path().join("hosts"),
        listed(&cluster, &[0, 1, 2]).join("\n") + "\n",
    )
    .unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(child.wait().unwrap().success(), "{stderr}");
    assert_no_worker_left(&cluster);
    let done = regression::check_final(out.path());
    assert_eq!(round_size(out.path(), 2), Some(6), "{stderr}");
    let removed = address(&cluster, 3);
    let gone: Vec<String> = regression::lines(out.path(), "workers")
        .into_iter()
        .filter(|w| w.starts_with(&format!("{removed}:")))
        .collect();
    assert_eq!(gone.len(), 2, "{gone:?}");
    assert!(
        gone.iter().all(|w| w.contains(" removed executed ")),
        "{gone:?}"
    );
    assert_eq!(
        worker_steps(out.path(), "0:0.0"),
        done.steps,
        "nothing rolled back"
    );
    assert!(charged(&stderr).is_empty(), "{stderr}");
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_host_that_fails_whenever_it_joins_returns_after_growing_cooldowns() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let victim = address(&cluster, 3);
    let args = [
        "--elastic",
        "-H",
        &all_hosts(&cluster),
        "--min-np",
        "2",
        "--blacklist-cooldown-range",
        "1",
        "8",
    ];
    let (run, stderr) = run_to_end(
        &cluster,
        &args,
        out.path(),
        &format!("fail-on-join:{victim}"),
        60,
    );
    assert!(run.status.success(), "{stderr}");
    regression::check_final(out.path());
    let charges = charged(&stderr);
    assert!(
        charges.len() >= 2,
        "charged again after its cooldown: {stderr}"
    );
    assert!(
        charges.iter().all(|h| *h == victim),
        "only {victim}: {stderr}"
    );
    assert!(
        stderr.contains(&format!("host {victim} is kept out for 1s")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("host {victim} is kept out for 2s")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("host(s) {victim} back after their cooldown")),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn too_few_slots_fail_after_the_elastic_timeout_naming_every_host() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let victim = address(&cluster, 0);
    let args = [
        "--elastic",
        "-H",
        &all_hosts(&cluster),
        "--min-np",
        "8",
        "--elastic-timeout",
        "4",
    ];
    let run = hvdrun(
        &cluster,
        &args,
        out.path(),
        &format!("kill-host:{victim}:6"),
        20,
    )
    .output()
    .unwrap();
    let failed_at = now_ms();
    let stderr = finish(&cluster, &run);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    let waited = failed_at - killed_at(out.path());
    measured(&format!(
        "too few slots: failed {waited} ms after the kill (timeout 4 s)"
    ));
    assert!(
        (2000..6000).contains(&waited),
        "failed {waited} ms after the kill"
    );
    assert!(
        stderr.contains(
            "hvdrun: only 6 slot(s) were available for 4s, fewer than --min-np 8; hosts:"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("\n  {victim}: blacklisted for")),
        "{stderr}"
    );
    let other = address(&cluster, 1);
    assert!(
        stderr.contains(&format!("\n  {other}: 2 slot(s), 2 worker(s) running")),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_graceful_removal_below_min_np_then_an_added_host_completes() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let mut child = discovered(&cluster, out.path(), &[0, 1, 2, 3], 8);
    let listing = out.path().join("hosts");
    std::fs::write(&listing, listed(&cluster, &[0, 1, 2]).join("\n") + "\n").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&listing, listed(&cluster, &[0, 1, 2, 3]).join("\n") + "\n").unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(child.wait().unwrap().success(), "{stderr}");
    assert_no_worker_left(&cluster);
    regression::check_final(out.path());
    assert!(charged(&stderr).is_empty(), "{stderr}");
}

/// The first of two hosts dies at step 10; the second as its workers start round 2.
fn two_failures(cluster: &Cluster) -> String {
    format!(
        "kill-host:{}:10,die-in-sync:{}:2",
        address(cluster, 2),
        address(cluster, 3)
    )
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn the_reset_limit_ends_a_job_that_needs_one_more_round() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let args = [
        "--elastic",
        "-H",
        &all_hosts(&cluster),
        "--min-np",
        "2",
        "--reset-limit",
        "1",
    ];
    let (run, stderr) = run_to_end(&cluster, &args, out.path(), &two_failures(&cluster), 20);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("hvdrun: the job would need a new round (reset 2) after round 2, more than --reset-limit 1 allows"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn losing_rank_0s_host_moves_rank_0_and_keeps_the_newest_commit() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let first = address(&cluster, 0);
    survives(&cluster, out.path(), &format!("kill-host:{first}:14"));
    let rank0: Vec<String> = regression::lines(out.path(), "rounds")
        .into_iter()
        .filter(|l| l.starts_with("2 ") && l.split(' ').nth(3) == Some("0"))
        .collect();
    assert_eq!(rank0.len(), 1, "{rank0:?}");
    assert!(
        !rank0[0].contains(&format!(" {first}:")),
        "rank 0 moved: {rank0:?}"
    );
    // Round 2 resumed from the last commit before the kill (step 12), not from zero.
    let resumed: u64 = rank0[0].rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(resumed, 12, "{rank0:?}");
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_second_host_lost_during_recovery_takes_a_third_round_and_the_job_completes() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let stderr = survives(&cluster, out.path(), &two_failures(&cluster));
    assert_eq!(round_size(out.path(), 3), Some(4), "{stderr}");
    let recovered = round_starts(out.path(), 3).into_iter().max().unwrap() - killed_at(out.path());
    measured(&format!(
        "two failures: round 3 trained {recovered} ms after the first kill"
    ));
    assert!(
        recovered < 8000,
        "round 3 began {recovered} ms after the first kill"
    );
    let mut charges = charged(&stderr);
    charges.sort();
    let mut expected = vec![address(&cluster, 2), address(&cluster, 3)];
    expected.sort();
    assert_eq!(charges, expected, "{stderr}");
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_shape_mismatch_fails_the_job_at_once_without_a_reset() {
    let cluster = Cluster::from_env();
    let out = tempfile::tempdir().unwrap();
    let args = ["--elastic", "-H", &all_hosts(&cluster), "--min-np", "2"];
    let started = Instant::now();
    let (run, stderr) = run_to_end(&cluster, &args, out.path(), "mismatch:5", 20);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("failed with an error no new round can cure, which ends the job: Mismatched shapes for tensor 'grad': rank 0 has [8], rank 1 has [9]"),
        "{stderr}"
    );
    assert!(
        round_size(out.path(), 2).is_none(),
        "no second round: {stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}
