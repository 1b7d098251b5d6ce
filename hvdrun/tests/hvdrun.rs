//! hvdrun as users run it: real processes, and the exact text they read. The ranks are
//! the train_logistic example, or this test binary's ignored test `rank_body`.

#[path = "common/example.rs"]
mod example;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use hvd::ReduceOp;

const HVDRUN: &str = env!("CARGO_BIN_EXE_hvdrun");

/// hvdrun's arguments after the options that run `rank_body` of this binary with
/// `scenario`.
fn ranks_of(scenario: &str) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    [
        "-x",
        &format!("HVD_TEST_SCENARIO={scenario}"),
        exe.to_str().unwrap(),
        "rank_body",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn rank_body() {
    match std::env::var("HVD_TEST_SCENARIO").unwrap().as_str() {
        // Allreduces until the job fails; then fails too, as a training script would.
        "allreduce" => {
            let hvd = hvd::init().unwrap();
            loop {
                if let Err(e) = hvd.allreduce("grad", vec![1.0f32; 4 << 20], ReduceOp::Sum) {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            }
        }
        // Connects a transport without the runtime (as hvd-bench does) and outlives
        // the start timeout.
        "transport" => {
            let backend = hvd::Backend::from_env().unwrap();
            let world = hvd::transport::world(backend).unwrap();
            let group = hvd::transport::connect(backend, &world).unwrap();
            std::thread::sleep(Duration::from_millis(800));
            group.barrier().unwrap();
            println!("rank {} connected", group.topology().rank());
        }
        // Checks in and leaves at once: the job ends between two polls of the launcher.
        "check in and leave" => {
            let backend = hvd::Backend::from_env().unwrap();
            let world = hvd::transport::world(backend).unwrap();
            hvd::transport::connect(backend, &world).unwrap();
        }
        other => panic!("unknown scenario {other}"),
    }
}

fn hvdrun(args: &[&str]) -> Output {
    Command::new(HVDRUN)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sorted_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = text(bytes).lines().map(String::from).collect();
    lines.sort();
    lines
}

/// How many processes have `marker` in their command line.
fn processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| text(cmdline).contains(marker))
        .count()
}

/// Waits up to 2 s for every process with `marker` to be gone (a SIGKILLed process takes a
/// moment to disappear from /proc).
fn assert_none_left(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while processes_with(marker) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_with(marker), 0, "processes left with {marker}");
}

#[test]
fn every_line_is_tagged_with_its_rank_and_stream() {
    let out = hvdrun(&[
        "-np",
        "2",
        "sh",
        "-c",
        "echo out $HVD_RANK; echo err $HVD_RANK >&2; printf 'no newline'",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sorted_lines(&out.stdout),
        [
            "[0]<stdout>: no newline",
            "[0]<stdout>: out 0",
            "[1]<stdout>: no newline",
            "[1]<stdout>: out 1"
        ]
    );
    assert_eq!(
        sorted_lines(&out.stderr),
        ["[0]<stderr>: err 0", "[1]<stderr>: err 1"]
    );
}

/// libfabric reads rxm's eager limit only from the environment: a job over the tcp
/// provider gets hvd's (256 KiB, not rxm's 16 KiB), and a user's own setting stays.
#[test]
fn ranks_over_libfabrics_tcp_provider_get_the_higher_eager_limit() {
    let run = |vars: &[(&str, &str)]| {
        let out = Command::new(HVDRUN)
            .args(["-np", "1", "sh", "-c", "echo limit=$FI_OFI_RXM_EAGER_LIMIT"])
            .env_remove("RUST_LOG")
            .env_remove("FI_OFI_RXM_EAGER_LIMIT")
            .env_remove("FI_PROVIDER")
            .env_remove("HVD_RDMA_PROVIDER")
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert_eq!(
        run(&[("HVD_RDMA_PROVIDER", "tcp;ofi_rxm")]),
        "[0]<stdout>: limit=262144\n"
    );
    assert_eq!(run(&[]), "[0]<stdout>: limit=\n");
    assert_eq!(
        run(&[
            ("HVD_RDMA_PROVIDER", "tcp;ofi_rxm"),
            ("FI_OFI_RXM_EAGER_LIMIT", "65536")
        ]),
        "[0]<stdout>: limit=65536\n"
    );
}

#[test]
fn each_rank_gets_its_place_under_hvds_names_and_horovods() {
    let out = hvdrun(&[
        "-np",
        "2",
        "sh",
        "-c",
        "echo $HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE \
         $HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE $HOROVOD_HOSTNAME; \
         echo $HVD_RANK $HVD_SIZE $HVD_LOCAL_RANK $HVD_LOCAL_SIZE $HVD_CROSS_RANK \
         $HVD_CROSS_SIZE $HVD_HOSTNAME",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sorted_lines(&out.stdout),
        [
            "[0]<stdout>: 0 2 0 2 0 1 localhost",
            "[0]<stdout>: 0 2 0 2 0 1 localhost",
            "[1]<stdout>: 1 2 1 2 0 1 localhost",
            "[1]<stdout>: 1 2 1 2 0 1 localhost"
        ]
    );
}

#[test]
fn horovods_flags_reach_the_ranks_and_unknown_ones_never_run() {
    let out = hvdrun(&[
        "-np",
        "1",
        "--gloo",
        "--fusion-threshold-mb",
        "32",
        "--stall-check-shutdown-time-seconds",
        "60",
        "sh",
        "-c",
        "echo $HVD_FUSION_THRESHOLD $HVD_STALL_SHUTDOWN_TIME",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[0]<stdout>: 32MiB 60s\n");
    let out = hvdrun(&["-np", "1", "--glo", "touch", "should-not-exist"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("error: unexpected argument '--glo' found"),
        "{}",
        text(&out.stderr)
    );
    assert!(!std::path::Path::new("should-not-exist").exists());
}

#[test]
fn output_filename_writes_each_rank_to_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let out = hvdrun(&[
        "-np",
        "2",
        "--output-filename",
        logs.to_str().unwrap(),
        "sh",
        "-c",
        "echo out $HVD_RANK; echo err $HVD_RANK >&2",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    for rank in 0..2 {
        let read = |name: &str| std::fs::read_to_string(logs.join(format!("rank.{rank}/{name}")));
        assert_eq!(read("stdout").unwrap(), format!("out {rank}\n"));
        assert_eq!(read("stderr").unwrap(), format!("err {rank}\n"));
    }
}

#[test]
fn an_argument_that_is_not_text_is_refused_by_position() {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new(HVDRUN)
        .args(["-np", "1", "cat"])
        .arg(std::ffi::OsStr::from_bytes(b"data-\xff.bin"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "hvdrun: argument 4 (data-\u{fffd}.bin) is not UTF-8 text, which hvdrun cannot pass on to its ranks\n"
    );
}

#[test]
fn the_ranks_wait_for_each_other_as_long_as_hvdrun_waits_for_them() {
    let echo = ["sh", "-c", "echo $HVD_START_TIMEOUT"];
    let out = hvdrun(&[&["--start-timeout", "7.5", "-np", "1"][..], &echo].concat());
    assert_eq!(text(&out.stdout), "[0]<stdout>: 7.5\n");
    let out = hvdrun(&[&["-np", "1", "-x", "HVD_START_TIMEOUT=9"][..], &echo].concat());
    assert_eq!(text(&out.stdout), "[0]<stdout>: 9\n", "-x wins");
    let out = Command::new(HVDRUN)
        .args(["-np", "1", "sh", "-c", "echo $HVD_START_TIMEOUT"])
        .env("HVD_START_TIMEOUT", "11")
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        "[0]<stdout>: 11\n",
        "hvdrun's own environment wins over its default"
    );
}

#[test]
fn a_duration_past_ten_years_is_refused_before_any_rank_starts() {
    for (flag, value) in [("--grace", "1e19"), ("--start-timeout", "3.2e11")] {
        let out = hvdrun(&[flag, value, "-np", "1", "true"]);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "hvdrun: {flag} {}: expected a number of seconds from 0 to ten years\n",
                value.parse::<f64>().unwrap()
            )
        );
    }
}

#[test]
fn an_output_directory_that_cannot_be_made_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = hvdrun(&[
        "-np",
        "1",
        "--output-filename",
        file.to_str().unwrap(),
        "true",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!(
        "hvdrun: creating the output directory {}: ",
        file.join("rank.0").display()
    );
    assert!(
        text(&out.stderr).starts_with(&expected),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_first_failure_is_summarised_and_its_exit_code_returned() {
    let marker = "30.0101";
    let started = Instant::now();
    let out = hvdrun(&[
        "-np",
        "3",
        "sh",
        "-c",
        &format!("if [ \"$HVD_RANK\" = 1 ]; then echo boom >&2; exit 3; fi; sleep {marker}"),
    ]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        text(&out.stderr),
        "[1]<stderr>: boom\n\
         hvdrun: rank 1 failed first (exit code 3); the other ranks were stopped. Last lines of its stderr:\n    boom\n"
    );
    assert_none_left(marker);
}

#[test]
fn a_rank_killed_by_a_signal_gives_128_plus_the_signal() {
    let marker = "30.0202";
    let out = hvdrun(&[
        "-np",
        "2",
        "sh",
        "-c",
        &format!("if [ \"$HVD_RANK\" = 1 ]; then kill -9 $$; fi; sleep {marker}"),
    ]);
    assert_eq!(out.status.code(), Some(137));
    assert_eq!(
        text(&out.stderr),
        "hvdrun: rank 1 failed first (killed by signal 9); the other rank was stopped. It wrote nothing to stderr.\n"
    );
    assert_none_left(marker);
}

#[test]
fn a_process_left_holding_a_ranks_output_does_not_hold_up_the_verdict() {
    let marker = "30.0606";
    let started = Instant::now();
    // Rank 0 leaves a process in a session of its own holding its stderr, then fails.
    let out = hvdrun(&[
        "-np",
        "2",
        "sh",
        "-c",
        &format!(
            "if [ \"$HVD_RANK\" = 0 ]; then setsid sleep {marker} >/dev/null & exit 3; fi; sleep {marker}"
        ),
    ]);
    let took = started.elapsed();
    // Not left running for the next test, whatever happened.
    for pid in pids_with(marker) {
        kill(pid, libc::SIGKILL);
    }
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        text(&out.stderr),
        "hvdrun: rank 0 exited, but a process it started outside its process group (setsid, a daemon) still holds its output open; hvdrun stops waiting for that output\n\
         hvdrun: rank 0 failed first (exit code 3); the other rank was stopped. It wrote nothing to stderr.\n"
    );
}

/// The pids of the processes with `marker` in their command line.
fn pids_with(marker: &str) -> Vec<libc::pid_t> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            text(&cmdline).contains(marker).then_some(pid)
        })
        .collect()
}

/// The pid of the process whose environment has `HVD_RANK=rank` and `marker`.
fn rank_pid(marker: &str, rank: usize) -> Option<libc::pid_t> {
    let wanted = format!("HVD_RANK={rank}");
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let entry = entry.ok()?;
        let pid: libc::pid_t = entry.file_name().to_str()?.parse().ok()?;
        let environ = std::fs::read(entry.path().join("environ")).ok()?;
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        (vars.contains(&wanted.as_bytes()) && vars.contains(&marker.as_bytes())).then_some(pid)
    })
}

fn kill(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

#[test]
fn a_rank_killed_mid_allreduce_is_named_not_the_survivors_that_lost_it() {
    // Three trials at different moments; `cargo xtask` has a 30-trial version of this.
    for (trial, delay_ms) in [150u64, 400, 900].into_iter().enumerate() {
        let marker = format!("HVDRUN_TEST_KILL={trial}");
        let child = Command::new(HVDRUN)
            .args(["-np", "3", "-x", &marker])
            .args(ranks_of("allreduce"))
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let victim = loop {
            if (0..3).all(|r| rank_pid(&marker, r).is_some()) {
                break rank_pid(&marker, 2).unwrap();
            }
            assert!(Instant::now() < deadline, "the ranks did not start");
            std::thread::sleep(Duration::from_millis(10));
        };
        std::thread::sleep(Duration::from_millis(delay_ms));
        kill(victim, libc::SIGKILL);
        let out = child.wait_with_output().unwrap();
        let stderr = text(&out.stderr);
        let summary = stderr
            .lines()
            .find(|l| l.starts_with("hvdrun: rank"))
            .unwrap_or_default();
        assert_eq!(
            summary,
            "hvdrun: rank 2 failed first (killed by signal 9); ranks 0, 1 failed because they lost rank 2. It wrote nothing to stderr.",
            "trial {trial}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(137), "trial {trial}: {stderr}");
    }
}

#[test]
fn local_ranks_die_with_a_killed_hvdrun() {
    let marker = "30.0505";
    let child = Command::new(HVDRUN)
        .args(["-np", "2", "sleep", marker])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_with(marker) < 3 {
        assert!(Instant::now() < deadline, "the ranks did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(libc::pid_t::try_from(child.id()).unwrap(), libc::SIGKILL);
    let _ = child.wait_with_output();
    assert_none_left(marker);
}

#[test]
fn ctrl_c_stops_every_rank_and_exits_130() {
    let marker = "30.0303";
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(HVDRUN)
        .args(["-np", "2", "sh", "-c"])
        .arg(format!(
            "touch {}/$HVD_RANK; sleep {marker}",
            dir.path().display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(0..2).all(|r| dir.path().join(r.to_string()).exists()) {
        assert!(Instant::now() < deadline, "the ranks did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) has no memory-safety preconditions; pid is our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(text(&out.stderr), "hvdrun: interrupted; stopping 2 ranks\n");
    assert_none_left(marker);
}

#[test]
fn ranks_that_never_call_init_are_named_at_the_start_timeout() {
    let out = hvdrun(&[
        "-np",
        "2",
        "--start-timeout",
        "1",
        "sh",
        "-c",
        "if [ \"$HVD_RANK\" = 1 ]; then echo no init here >&2; exit 0; fi; sleep 30.0404",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "[1]<stderr>: no init here\n\
         hvdrun: ranks 0, 1 did not connect within 1s; the job was stopped.\n  \
         rank 0: still running, never reached the rendezvous (did it call hvd::init()?)\n  \
         rank 1: exited (exit code 0). Last lines of its stderr:\n    no init here\n"
    );
    assert_none_left("30.0404");
}

#[test]
fn a_command_that_cannot_start_is_reported_at_once() {
    let out = hvdrun(&["-np", "2", "hvdrun-no-such-command"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "hvdrun: starting rank 0: cannot run `hvdrun-no-such-command`: No such file or directory (os error 2)\n"
    );
}

#[test]
fn x_sets_a_variable_or_passes_on_hvdruns_own() {
    let out = Command::new(HVDRUN)
        .args([
            "-np",
            "1",
            "-x",
            "SET_HERE=a=b",
            "-x",
            "FROM_HVDRUN",
            "sh",
            "-c",
        ])
        .arg("echo $SET_HERE $FROM_HVDRUN $INHERITED")
        .env("FROM_HVDRUN", "forwarded")
        .env("INHERITED", "inherited")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[0]<stdout>: a=b forwarded inherited\n");

    let out = Command::new(HVDRUN)
        .args(["-np", "1", "-x", "HVDRUN_TEST_UNSET", "true"])
        .env_remove("HVDRUN_TEST_UNSET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "hvdrun: -x HVDRUN_TEST_UNSET: HVDRUN_TEST_UNSET is not set in hvdrun's environment (use -x HVDRUN_TEST_UNSET=VALUE to set it)\n"
    );
}

#[test]
fn a_training_job_runs_under_hvdrun_and_checks_in() {
    let train = example::example("train_logistic");
    let out = hvdrun(&["-np", "2", train.to_str().unwrap(), "--epochs", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("[0]<stdout>: epoch  1  loss "),
        "{stdout}"
    );
    assert!(stdout.contains("on 2 ranks"), "{stdout}");
    // Not a terminal: the progress line is printed when the count changes, and the
    // final count before the job ends, however quickly it ends.
    assert!(
        text(&out.stderr)
            .lines()
            .any(|l| l == "hvdrun: 2/2 ranks connected"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_job_that_ends_between_two_polls_still_says_every_rank_connected() {
    let mut args = vec!["-np", "2"];
    let body = ranks_of("check in and leave");
    args.extend(body.iter().map(String::as_str));
    for trial in 0..5 {
        let out = hvdrun(&args);
        assert!(out.status.success(), "trial {trial}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(
            stderr.lines().any(|l| l == "hvdrun: 2/2 ranks connected"),
            "trial {trial}: {stderr}"
        );
    }
}

#[test]
fn a_program_that_connects_without_the_runtime_still_checks_in() {
    let mut args = vec!["-np", "2", "--start-timeout", "5"];
    let body = ranks_of("transport");
    args.extend(body.iter().map(String::as_str));
    let out = hvdrun(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        // After libtest's "test rank_body ... " on the same line.
        text(&out.stdout).contains("rank 1 connected"),
        "{}",
        text(&out.stdout)
    );
}
