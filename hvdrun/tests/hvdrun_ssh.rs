//! hvdrun across "hosts": ranks on this machine and ranks started over ssh (a private
//! sshd on 127.0.0.2, which hvdrun treats as another host, or in a network namespace,
//! which is another host to TCP too), with the real rendezvous, transport and
//! supervision.

#[path = "common/netns.rs"]
mod netns;
#[path = "common/sshd.rs"]
mod sshd;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use netns::NetnsHost;
use sshd::{REMOTE, Sshd};

const HVDRUN: &str = env!("CARGO_BIN_EXE_hvdrun");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn hvdrun(sshd: &Sshd, args: &[&str]) -> Command {
    hvdrun_on(sshd, sshd.port, args)
}

/// hvdrun with `sshd`'s key but ssh to `port`.
fn hvdrun_on(sshd: &Sshd, port: u16, args: &[&str]) -> Command {
    let mut command = Command::new(HVDRUN);
    command
        .args(sshd.hvdrun_args_on(port))
        .args(args)
        .env_remove("RUST_LOG")
        .env("HVD_TCP_TIMEOUT", "20");
    command
}

fn run(command: &mut Command) -> Output {
    command.output().unwrap()
}

/// A port on the remote address where nothing listens.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind((REMOTE, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

/// This test binary's `rank_body`, as the command of every rank.
fn rank_command() -> Vec<String> {
    [
        std::env::current_exe().unwrap().display().to_string(),
        "rank_body".into(),
        "--exact".into(),
        "--ignored".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ]
    .to_vec()
}

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn rank_body() {
    let hvd = hvd::init().unwrap();
    let sum = hvd
        .allreduce("ranks", vec![hvd.rank() as i32], hvd::ReduceOp::Sum)
        .unwrap();
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| "-".into());
    // After libtest's "test rank_body ... ", on a line of its own.
    println!();
    println!(
        "RANK {} of {} on {} local {}/{} cross {}/{} sum {} mark {} via {}",
        hvd.rank(),
        hvd.size(),
        var("HVD_HOSTNAME"),
        var("HVD_LOCAL_RANK"),
        var("HVD_LOCAL_SIZE"),
        var("HVD_CROSS_RANK"),
        var("HVD_CROSS_SIZE"),
        sum[0],
        var("HVD_TEST_MARK"),
        hvd.transport(),
    );
}

#[test]
#[ignore = "one rank of the cross-host conformance job launched by the test below"]
fn conformance_rank() {
    let world = hvd::World::from_env().unwrap();
    let backend = hvd::Backend::from_env().unwrap();
    let group = hvd::transport::connect(backend, &world).unwrap();
    let options = hvd::core::conformance::Options::quick();
    match hvd::core::conformance::run_rank(group.as_ref(), &options) {
        Ok(report) => println!(
            "\nCONFORMANCE {} passed {} checks via {}",
            report.rank,
            report.passed.len(),
            group.backend()
        ),
        Err(failure) => panic!("FAILED {failure}"),
    }
}

#[test]
#[cfg_attr(
    not(all(hvd_have_sshd, hvd_have_netns)),
    ignore = "needs root, iproute2 and sshd: run as root; apt-get install iproute2 openssh-server"
)]
fn the_conformance_suite_passes_across_hosts_through_hierarchical_allreduce() {
    let host = NetnsHost::start(2);
    let sshd = host.sshd.as_ref().expect("sshd in the namespace");
    let interfaces = format!("{},{}", host.here_iface, host.there_iface);
    // 2 + 2 ranks (one cross group per local rank), then 1 + 2 (leaders).
    for (hosts, np) in [
        (format!("localhost:2,{}:2", host.there), 4),
        (format!("localhost:1,{}:2", host.there), 3),
    ] {
        let np_text = np.to_string();
        let mut args = vec![
            "-np",
            &np_text,
            "-H",
            &hosts,
            "--network-interface",
            &interfaces,
            "--",
        ];
        let command = [
            std::env::current_exe().unwrap().display().to_string(),
            "conformance_rank".into(),
            "--exact".into(),
            "--ignored".into(),
            "--nocapture".into(),
            "--test-threads=1".into(),
        ];
        args.extend(command.iter().map(String::as_str));
        let out = run(&mut hvdrun(sshd, &args));
        assert!(out.status.success(), "{hosts}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let passed: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.split_once("CONFORMANCE ").map(|(_, rest)| rest))
            .collect();
        assert_eq!(passed.len(), np, "{hosts}: {stdout}");
        assert!(
            passed.iter().all(|l| l.ends_with("via hierarchical")),
            "{passed:?}"
        );
    }
}

fn rank_lines(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = text(&out.stdout)
        .lines()
        .filter(|l| l.contains("RANK "))
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn a_job_spans_this_host_and_another_over_ssh() {
    let sshd = Sshd::start();
    let hosts = format!("localhost:1,{REMOTE}:2");
    let mut args = vec![
        "-np",
        "3",
        "-H",
        &hosts,
        "-x",
        "HVD_TEST_MARK=travelled",
        "--",
    ];
    let command = rank_command();
    args.extend(command.iter().map(String::as_str));
    // A secret in hvdrun's own environment (a leftover, or a nested job) must neither
    // travel nor replace the job's.
    let out = run(hvdrun(&sshd, &args).env("HVD_SECRET", "stale"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        rank_lines(&out),
        [
            "[0]<stdout>: RANK 0 of 3 on localhost local 0/1 cross 0/2 sum 3 mark travelled via tcp",
            "[1]<stdout>: RANK 1 of 3 on 127.0.0.2 local 0/2 cross 1/2 sum 3 mark travelled via tcp",
            "[2]<stdout>: RANK 2 of 3 on 127.0.0.2 local 1/2 cross 1/2 sum 3 mark travelled via tcp",
        ]
    );
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn a_bare_hvdrun_under_an_mpi_operator_hostfile_starts_the_remote_ranks_over_ssh() {
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    let hostfile = dir.path().join("hostfile");
    std::fs::write(&hostfile, format!("localhost slots=1\n{REMOTE} slots=2\n")).unwrap();
    let mut args = vec!["-x", "HVD_TEST_MARK=pod", "--"];
    let command = rank_command();
    args.extend(command.iter().map(String::as_str));
    let mut launcher = hvdrun(&sshd, &args);
    for name in hvdrun::HOSTFILE_VARIABLES {
        launcher.env_remove(name);
    }
    let out = run(launcher.env("OMPI_MCA_orte_default_hostfile", &hostfile));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        rank_lines(&out),
        [
            "[0]<stdout>: RANK 0 of 3 on localhost local 0/1 cross 0/2 sum 3 mark pod via tcp",
            "[1]<stdout>: RANK 1 of 3 on 127.0.0.2 local 0/2 cross 1/2 sum 3 mark pod via tcp",
            "[2]<stdout>: RANK 2 of 3 on 127.0.0.2 local 1/2 cross 1/2 sum 3 mark pod via tcp",
        ]
    );
}

#[test]
#[cfg_attr(
    not(all(hvd_have_sshd, hvd_have_netns)),
    ignore = "needs root, iproute2 and sshd: run as root; apt-get install iproute2 openssh-server"
)]
fn a_job_across_network_namespaces_runs_on_the_named_interfaces() {
    let host = NetnsHost::start(1);
    let sshd = host.sshd.as_ref().expect("sshd in the namespace");
    let hosts = format!("localhost:1,{}:2", host.there);
    // Each host has one of the two names: the list is how one flag serves both.
    let interfaces = format!("{},{}", host.here_iface, host.there_iface);
    let mut args = vec!["-np", "3", "-H", &hosts, "--network-interface", &interfaces];
    args.extend(["-x", "HVD_TEST_MARK=crossed", "--"]);
    let command = rank_command();
    args.extend(command.iter().map(String::as_str));
    let out = run(&mut hvdrun(sshd, &args));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        rank_lines(&out),
        [
            "[0]<stdout>: RANK 0 of 3 on localhost local 0/1 cross 0/2 sum 3 mark crossed via hierarchical",
            "[1]<stdout>: RANK 1 of 3 on 10.231.1.2 local 0/2 cross 1/2 sum 3 mark crossed via hierarchical",
            "[2]<stdout>: RANK 2 of 3 on 10.231.1.2 local 1/2 cross 1/2 sum 3 mark crossed via hierarchical",
        ]
    );
    // Two ranks on each host: shared memory within each, TCP between them; and the
    // same job with hierarchical allreduce turned off.
    let hosts = format!("localhost:2,{}:2", host.there);
    for (setting, via) in [("1", "hierarchical"), ("0", "tcp")] {
        let mut args = vec!["-np", "4", "-H", &hosts, "--network-interface", &interfaces];
        let switch = format!("HOROVOD_HIERARCHICAL_ALLREDUCE={setting}");
        args.extend(["-x", &switch, "-x", "HVD_TEST_MARK=hier", "--"]);
        args.extend(command.iter().map(String::as_str));
        let out = run(&mut hvdrun(sshd, &args));
        assert!(out.status.success(), "{}", text(&out.stderr));
        let there = host.there;
        assert_eq!(
            rank_lines(&out),
            [
                format!(
                    "[0]<stdout>: RANK 0 of 4 on localhost local 0/2 cross 0/2 sum 6 mark hier via {via}"
                ),
                format!(
                    "[1]<stdout>: RANK 1 of 4 on localhost local 1/2 cross 0/2 sum 6 mark hier via {via}"
                ),
                format!(
                    "[2]<stdout>: RANK 2 of 4 on {there} local 0/2 cross 1/2 sum 6 mark hier via {via}"
                ),
                format!(
                    "[3]<stdout>: RANK 3 of 4 on {there} local 1/2 cross 1/2 sum 6 mark hier via {via}"
                ),
            ]
        );
    }
    let hosts = format!("localhost:1,{}:1", host.there);
    let check = ["--check", "-H", &hosts, "--network-interface", &interfaces];
    let out = run(&mut hvdrun(sshd, &check));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for line in [
        format!(
            "  net  localhost            interface {} (10.231.1.1)",
            host.here_iface
        ),
        format!(
            "  net  10.231.1.2           interface {} (10.231.1.2)",
            host.there_iface
        ),
    ] {
        assert!(stdout.lines().any(|l| l == line), "{line} in\n{stdout}");
    }
    assert_eq!(stdout.matches(": ok\n").count(), 2, "{stdout}");
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn a_remote_failure_is_summarised_with_its_host_and_code() {
    let sshd = Sshd::start();
    let hosts = format!("localhost:1,{REMOTE}:1");
    let out = run(&mut hvdrun(
        &sshd,
        &[
            "-np",
            "2",
            "-H",
            &hosts,
            "sh",
            "-c",
            "if [ $HVD_RANK = 1 ]; then echo broken on purpose >&2; exit 3; fi; sleep 30.0202",
        ],
    ));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).ends_with(
            "hvdrun: rank 1 on 127.0.0.2 failed first (exit code 3); the other rank was stopped. \
             Last lines of its stderr:\n    broken on purpose\n"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn an_unreachable_host_and_a_missing_command_are_named() {
    let sshd = Sshd::start();
    let hosts = format!("{REMOTE}:1");
    // Nothing listens on the port hvdrun is told to use.
    let closed = closed_port();
    let out = run(&mut hvdrun_on(
        &sshd,
        closed,
        &["-np", "1", "-H", &hosts, "true"],
    ));
    assert_eq!(out.status.code(), Some(255));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "hvdrun: rank 0 failed first (exit code 255: ssh failed (host unreachable, login refused, or the rank exited 255)). Last lines of its stderr:\n    ssh: connect to host 127.0.0.2 port "
        ) && stderr.contains("Connection refused"),
        "{stderr}"
    );
    let out = run(&mut hvdrun(
        &sshd,
        &["-np", "1", "-H", &hosts, "/nonexistent/train"],
    ));
    assert_eq!(out.status.code(), Some(127));
    assert!(
        text(&out.stderr)
            .contains("hvdrun: rank 0 failed first (exit code 127: command not found)"),
        "{}",
        text(&out.stderr)
    );
}

/// Whether a process with this id is alive.
fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits up to `limit` for the process to be gone.
fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

/// Starts a job whose remote rank writes its pid and sleeps; returns hvdrun and the pid.
fn job_with_a_sleeping_remote_rank(
    sshd: &Sshd,
    dir: &std::path::Path,
    local: &str,
) -> (std::process::Child, i32) {
    let hosts = format!("localhost:1,{REMOTE}:1");
    let pid_file = dir.join("remote.pid");
    let script = format!(
        "if [ $HVD_RANK = 1 ]; then echo $$ > {}; exec sleep 300; fi; {local}",
        pid_file.display()
    );
    let child = hvdrun(
        sshd,
        &[
            "-np", "2", "--grace", "1", "-H", &hosts, "sh", "-c", &script,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the remote rank never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    (child, pid)
}

/// Runs a job whose remote rank sleeps while the local one runs `local`; `act` does
/// something to hvdrun. Checks hvdrun's exit code and that the remote rank is gone.
fn remote_rank_is_gone_after(local: &str, act: impl FnOnce(&std::process::Child), code: i32) {
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    let local = local.replace(
        "PIDFILE",
        &dir.path().join("remote.pid").display().to_string(),
    );
    let (child, pid) = job_with_a_sleeping_remote_rank(&sshd, dir.path(), &local);
    act(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    assert!(
        gone_within(pid, Duration::from_secs(5)),
        "the remote rank outlived the job"
    );
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn no_remote_rank_outlives_a_failed_job() {
    let wait_then_fail = "while [ ! -s PIDFILE ]; do sleep 0.05; done; exit 4";
    remote_rank_is_gone_after(wait_then_fail, |_| {}, 4);
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn ctrl_c_stops_remote_ranks_too() {
    let interrupt = |child: &std::process::Child| {
        // SAFETY: kill with a valid signal on a child process id has no memory effects.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    };
    remote_rank_is_gone_after("exec sleep 300", interrupt, 130);
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn check_reports_ssh_interfaces_and_tcp_between_hosts() {
    let sshd = Sshd::start();
    let hosts = format!("localhost:1,{REMOTE}:1");
    let out = run(&mut hvdrun(&sshd, &["--check", "-H", &hosts]));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "hvdrun: checking 2 host(s)");
    assert_eq!(
        lines[1],
        "  ssh  localhost            this machine, started directly"
    );
    assert!(
        lines[2].starts_with("  ssh  127.0.0.2            ok ("),
        "{stdout}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("  net  ")).count(),
        2,
        "{stdout}"
    );
    let tcp: Vec<&&str> = lines.iter().filter(|l| l.starts_with("  tcp  ")).collect();
    assert!(
        !tcp.is_empty() && tcp.iter().all(|l| l.ends_with(": ok")),
        "{stdout}"
    );
    assert_eq!(
        lines.last(),
        Some(&"hvdrun: ok: every host can reach every other")
    );
}

#[test]
#[cfg_attr(
    not(hvd_have_sshd),
    ignore = "needs sshd: apt-get install openssh-server openssh-client"
)]
fn check_names_a_host_it_cannot_log_in_to() {
    let sshd = Sshd::start();
    let closed = closed_port();
    let hosts = format!("localhost:1,{REMOTE}:1");
    let out = run(&mut hvdrun_on(&sshd, closed, &["--check", "-H", &hosts]));
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "  ssh  127.0.0.2            FAILED: ssh: connect to host 127.0.0.2 port {closed}: Connection refused"
        )),
        "{stdout}"
    );
    assert_eq!(
        text(&out.stderr),
        "hvdrun: cannot log in to 127.0.0.2 over ssh without a password; fix that first (ssh-copy-id, -p PORT, -i KEY)\n"
    );
}
