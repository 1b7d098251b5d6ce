//! Elastic jobs on this machine: two "hosts" (`localhost` and `127.0.0.1`, both this
//! machine, reached without ssh) of two slots each, running the regression of
//! `common/regression.rs`. Each scenario checks the job's outcome, what hvdrun said,
//! and that the committed run saw every example exactly once per epoch and reached the
//! one-process weights. The simulated cluster (`tests/elastic_cluster.rs`) runs the
//! same job across real network namespaces.

#[path = "common/regression.rs"]
mod regression;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hvdrun::elastic::{Elastic, HostSource};
use hvdrun::{Host, Job, JobOutcome};

#[test]
#[ignore = "a worker of the elastic jobs the other tests of this file launch"]
fn elastic_worker() {
    regression::worker();
}

fn hosts(spec: &[(&str, usize)]) -> Vec<Host> {
    spec.iter()
        .map(|(name, slots)| Host {
            name: name.to_string(),
            slots: *slots,
        })
        .collect()
}

/// This binary's worker as an elastic job writing into `out`, with `fault`.
fn job(out: &Path, fault: &str) -> Job {
    let args = [
        "elastic_worker",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ];
    Job::new(
        std::env::current_exe().unwrap(),
        args.map(String::from).to_vec(),
        1,
    )
    .env("ELASTIC_OUT", out.to_str().unwrap())
    .env("ELASTIC_FAULT", fault)
    .env("HVD_TIMEOUT", "5")
    .quiet()
    .grace(Duration::from_millis(500))
}

fn fixed(spec: &[(&str, usize)], min_np: usize) -> Elastic {
    Elastic::new(HostSource::Fixed(hosts(spec)), min_np)
        .cooldown(Duration::from_secs(60), Duration::from_secs(60))
        .timeout(Duration::from_secs(30))
}

#[test]
fn a_job_without_failures_trains_as_one_process_would() {
    let out = tempfile::tempdir().unwrap();
    let elastic = fixed(&[("localhost", 2), ("127.0.0.1", 2)], 4);
    let outcome = job(out.path(), "").run_elastic(&elastic).unwrap();
    assert_eq!(outcome, JobOutcome::Success);
    let done = regression::check_final(out.path());
    assert_eq!(done.steps, 64);
    assert_eq!(regression::lines(out.path(), "workers").len(), 4);
}

#[test]
fn a_killed_host_is_left_behind_and_the_job_completes_at_the_smaller_size() {
    let out = tempfile::tempdir().unwrap();
    let elastic = fixed(&[("localhost", 2), ("127.0.0.1", 2)], 2);
    let outcome = job(out.path(), "kill-host:127.0.0.1:10")
        .run_elastic(&elastic)
        .unwrap();
    assert_eq!(outcome, JobOutcome::Success);
    regression::check_final(out.path());
    let rounds = regression::lines(out.path(), "rounds");
    assert!(
        rounds
            .iter()
            .any(|r| r.starts_with("2 ") && r.split(' ').nth(2) == Some("2")),
        "a second round of 2 ranks: {rounds:?}"
    );
}

#[test]
fn a_mismatch_ends_the_job_at_once_without_a_reset() {
    let out = tempfile::tempdir().unwrap();
    let elastic = fixed(&[("localhost", 2)], 2);
    let outcome = job(out.path(), "mismatch:5").run_elastic(&elastic).unwrap();
    let JobOutcome::Failed { exit_code, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(exit_code, 1);
    let errors = regression::lines(out.path(), "errors");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("Mismatched shapes for tensor 'grad'")),
        "{errors:?}"
    );
    let rounds = regression::lines(out.path(), "rounds");
    assert!(
        rounds.iter().all(|r| r.starts_with("1 ")),
        "no second round: {rounds:?}"
    );
}

#[test]
fn too_few_slots_for_longer_than_the_elastic_timeout_fail_naming_the_hosts() {
    let out = tempfile::tempdir().unwrap();
    let elastic = fixed(&[("localhost", 2), ("127.0.0.1", 2)], 4).timeout(Duration::from_secs(3));
    let started = std::time::Instant::now();
    let outcome = job(out.path(), "kill-host:127.0.0.1:6")
        .run_elastic(&elastic)
        .unwrap();
    let JobOutcome::Elastic { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        reason.starts_with("only 2 slot(s) were available for 3s, fewer than --min-np 4; hosts:"),
        "{reason}"
    );
    assert!(
        reason.contains("\n  127.0.0.1: blacklisted for"),
        "{reason}"
    );
    assert!(
        reason.contains("\n  localhost: 2 slot(s), 2 worker(s) running"),
        "{reason}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_host_added_by_discovery_joins_at_the_next_commit_and_nothing_is_rolled_back() {
    let out = tempfile::tempdir().unwrap();
    let listing = out.path().join("hosts");
    std::fs::write(&listing, "localhost:2\n").unwrap();
    let script = out.path().join("discover.sh");
    std::fs::write(&script, format!("#!/bin/sh\ncat {}\n", listing.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let elastic = Elastic::new(
        HostSource::Script {
            path: script,
            slots_per_host: None,
        },
        2,
    )
    .timeout(Duration::from_secs(30))
    .discovery_interval(Duration::from_millis(200));
    let grower = std::thread::spawn({
        let (listing, out) = (listing.clone(), out.path().to_path_buf());
        move || {
            // Once the job is training, a second host appears.
            while regression::lines(&out, "rounds").is_empty() {
                std::thread::sleep(Duration::from_millis(20));
            }
            std::fs::write(&listing, "localhost:2\n127.0.0.1:2\n").unwrap();
        }
    });
    let outcome = job(out.path(), "")
        .env("ELASTIC_STEP_MS", "30")
        .run_elastic(&elastic)
        .unwrap();
    grower.join().unwrap();
    assert_eq!(outcome, JobOutcome::Success);
    let done = regression::check_final(out.path());
    let rounds = regression::lines(out.path(), "rounds");
    assert!(
        rounds
            .iter()
            .any(|r| r.starts_with("2 ") && r.split(' ').nth(2) == Some("4")),
        "grew to 4 ranks: {rounds:?}"
    );
    // Growing rolls nothing back: every step was executed once, by every worker there.
    let executed: u64 = regression::lines(out.path(), "workers")
        .iter()
        .filter(|w| w.starts_with("localhost:0"))
        .map(|w| w.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(executed, done.steps);
}

#[test]
fn elastic_workers_need_hvdrun() {
    // A worker variable without hvdrun's store is refused with the reason.
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["elastic_worker", "--exact", "--ignored", "--nocapture"])
        .env("HVD_ELASTIC_WORKER", "a:0.0")
        .env("ELASTIC_OUT", tempfile::tempdir().unwrap().path())
        .env_remove("HVD_STORE_ADDR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("HVD_ELASTIC_WORKER is set but HVD_STORE_ADDR is not: elastic workers are started by hvdrun, which sets both"),
        "{stderr}"
    );
}

const HVDRUN: &str = env!("CARGO_BIN_EXE_hvdrun");

fn hvdrun(args: &[&str], out: &Path) -> std::process::Output {
    let worker = std::env::current_exe().unwrap();
    Command::new(HVDRUN)
        .args(args)
        .args(["-x", &format!("ELASTIC_OUT={}", out.display())])
        .arg(worker)
        .args([
            "elastic_worker",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn hvdrun_elastic_runs_the_job_and_says_what_each_round_is() {
    let out = tempfile::tempdir().unwrap();
    let args = [
        "--elastic",
        "-H",
        "localhost:2,127.0.0.1:1",
        "--min-np",
        "2",
    ];
    let run = hvdrun(&args, out.path());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("hvdrun: round 1: 3 ranks on 2 host(s): localhost, 127.0.0.1\n"),
        "{stderr}"
    );
    regression::check_final(out.path());
    // Each worker's lines are tagged with its host and slot.
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("[127.0.0.1:0]<stdout>: "), "{stdout}");
}

#[test]
fn hvdrun_refuses_elastic_mpi_and_a_backwards_cooldown_range() {
    let out = tempfile::tempdir().unwrap();
    let mpi = hvdrun(
        &["--elastic", "-np", "2", "-x", "HVD_BACKEND=mpi"],
        out.path(),
    );
    assert_eq!(
        String::from_utf8_lossy(&mpi.stderr),
        "hvdrun: an elastic job cannot run over MPI, whose world is fixed when the job starts: use the default transport (unset HVD_BACKEND), which hvdrun's rounds can rebuild\n"
    );
    let range = [
        "--elastic",
        "-np",
        "2",
        "--blacklist-cooldown-range",
        "9",
        "3",
    ];
    let backwards = hvdrun(&range, out.path());
    assert_eq!(
        String::from_utf8_lossy(&backwards.stderr),
        "hvdrun: --blacklist-cooldown-range 9 3: MIN must not exceed MAX\n"
    );
    assert_eq!(backwards.status.code(), Some(1));
}

#[test]
fn a_discovery_script_of_bare_host_names_gets_slots_per_host_ranks_on_each() {
    let out = tempfile::tempdir().unwrap();
    let script = out.path().join("discover.sh");
    std::fs::write(&script, "#!/bin/sh\necho localhost\necho 127.0.0.1\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script_arg = script.display().to_string();
    let args = [
        "--host-discovery-script",
        &script_arg,
        "--slots-per-host",
        "2",
        "--min-np",
        "4",
    ];
    let run = hvdrun(&args, out.path());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("hvdrun: round 1: 4 ranks on 2 host(s): localhost, 127.0.0.1\n"),
        "{stderr}"
    );
    regression::check_final(out.path());
    // Workers are tagged with their host and slot: two slots on each host.
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut workers: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix('[')?.split_once("]<")?.0.into())
        .collect();
    workers.sort();
    workers.dedup();
    assert_eq!(
        workers,
        ["127.0.0.1:0", "127.0.0.1:1", "localhost:0", "localhost:1"]
    );
}

#[test]
fn a_discovery_script_line_without_slots_is_refused_naming_the_script_and_line() {
    let out = tempfile::tempdir().unwrap();
    let script = out.path().join("discover.sh");
    std::fs::write(&script, "#!/bin/sh\necho localhost:2\necho 127.0.0.1\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script_arg = script.display().to_string();
    let args = ["--host-discovery-script", &script_arg, "--min-np", "2"];
    let run = hvdrun(&args, out.path());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.ends_with(&format!(
            "invalid value \"127.0.0.1\" for line 2 of what --host-discovery-script {script_arg} printed: expected `host:slots`, or `host` with --slots-per-host N (no slot count, and no --slots-per-host)\n"
        )),
        "{stderr}"
    );
}
