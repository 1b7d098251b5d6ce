//! A program that calls `hvd::init()` started by other launchers, unchanged, over the
//! default TCP transport: torchrun-style variables (rendezvous through rank 0 at
//! MASTER_ADDR:MASTER_PORT), srun's variables and Open MPI's mpirun (rendezvous through a
//! directory named after the job, all ranks being on one host; or through rank 0 on the
//! first node for a Slurm step across nodes).

use std::process::{Child, Command, Output, Stdio};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Variables of every launcher, cleared so that each test sets only its own.
const LAUNCHER_VARIABLES: [&str; 12] = [
    "HVD_RANK",
    "HVD_SIZE",
    "HVD_STORE_ADDR",
    "HVD_STORE_DIR",
    "HVD_SECRET",
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
];

const RANK_ARGS: [&str; 5] = [
    "rank_body",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

#[test]
#[ignore = "one rank of a job started by the other tests of this file"]
fn rank_body() {
    let hvd = match hvd::init() {
        Ok(hvd) => hvd,
        Err(e) => {
            eprintln!("init failed: {e}");
            std::process::exit(3);
        }
    };
    let sum = hvd
        .allreduce("ranks", vec![hvd.rank() as i32 + 1], hvd::ReduceOp::Sum)
        .unwrap();
    println!();
    println!("RANK {} of {} sum {}", hvd.rank(), hvd.size(), sum[0]);
}

/// Starts one rank of this test binary with `vars`.
fn start(vars: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(RANK_ARGS);
    for name in LAUNCHER_VARIABLES {
        command.env_remove(name);
    }
    command
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .env("HVD_START_TIMEOUT", "5")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn rank_line(out: &Output) -> String {
    text(&out.stdout)
        .lines()
        .find(|l| l.starts_with("RANK "))
        .unwrap_or("no RANK line")
        .to_string()
}

fn free_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port().to_string()
}

fn torchrun_rank(rank: usize, port: &str, secret: &str) -> Child {
    start(&[
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", "2".into()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.into()),
        ("HVD_SECRET", secret.into()),
    ])
}

/// Runs `job` (rank 0's output, rank 1's) on a port that was free a moment ago, again
/// on another when something else took it meanwhile (an outgoing connection of a
/// concurrent test may get the same number): rank 0 must bind the port it is given.
fn on_a_free_master_port(job: impl Fn(&str) -> (Output, Output)) -> (String, Output, Output) {
    for _ in 0..5 {
        let port = free_port();
        let (zero, one) = job(&port);
        if !text(&zero.stderr).contains("(MASTER_PORT; is it free?)") {
            return (port, zero, one);
        }
    }
    panic!("no free port for rank 0 in 5 tries");
}

#[test]
fn torchrun_style_variables_rendezvous_through_rank_0() {
    let (_, zero, one) = on_a_free_master_port(|port| {
        // Rank 1 first: it waits for rank 0's server to appear.
        let one = torchrun_rank(1, port, "s3cret");
        let zero = torchrun_rank(0, port, "s3cret");
        (
            zero.wait_with_output().unwrap(),
            one.wait_with_output().unwrap(),
        )
    });
    assert!(zero.status.success(), "{}", text(&zero.stderr));
    assert!(one.status.success(), "{}", text(&one.stderr));
    assert_eq!(rank_line(&zero), "RANK 0 of 2 sum 3");
    assert_eq!(rank_line(&one), "RANK 1 of 2 sum 3");
}

#[test]
fn a_rank_without_the_job_secret_is_refused_by_the_rendezvous_server() {
    let (port, zero, intruder) = on_a_free_master_port(|port| {
        let zero = torchrun_rank(0, port, "the job's secret");
        let intruder = torchrun_rank(1, port, "a guess");
        let intruder = intruder.wait_with_output().unwrap();
        (zero.wait_with_output().unwrap(), intruder)
    });
    assert_eq!(intruder.status.code(), Some(3));
    let intruder_err = text(&intruder.stderr);
    assert!(
        intruder_err.contains(&format!(
            "init failed: store: rendezvous server 127.0.0.1:{port} refused this rank's request: authentication failed: the sender does not hold the job secret (HVD_SECRET differs from the job's)"
        )),
        "{intruder_err}"
    );
    // Rank 0 logs the refusal, and gives up on the missing rank at its start timeout.
    let zero_err = text(&zero.stderr);
    assert!(
        zero_err.contains("rendezvous server refused a connection from 127.0.0.1:"),
        "{zero_err}"
    );
    assert_eq!(zero.status.code(), Some(3), "{zero_err}");
    assert!(
        zero_err.contains(
            "init failed: rank 0: connect of tensor 'rendezvous' timed out after 5s waiting for rank 1 to appear"
        ),
        "{zero_err}"
    );
}

#[test]
fn srun_variables_on_one_node_rendezvous_through_a_job_directory() {
    let job = format!("{}{}", std::process::id(), free_port());
    let slurm = |rank: usize| {
        start(&[
            ("SLURM_PROCID", rank.to_string()),
            ("SLURM_NTASKS", "2".into()),
            ("SLURM_JOB_ID", job.clone()),
            ("SLURM_STEP_ID", "0".into()),
            ("SLURM_STEP_NUM_NODES", "1".into()),
        ])
    };
    let ranks = [slurm(0), slurm(1)];
    let outs: Vec<Output> = ranks.map(|c| c.wait_with_output().unwrap()).into();
    for (rank, out) in outs.iter().enumerate() {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(rank_line(out), format!("RANK {rank} of 2 sum 3"));
    }
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("hvd-Slurm-{job}-0")));
}

#[test]
fn srun_variables_across_nodes_rendezvous_through_the_first_node() {
    let port = free_port();
    let slurm = |rank: usize, node: &str| {
        start(&[
            ("SLURM_PROCID", rank.to_string()),
            ("SLURM_NTASKS", "2".into()),
            ("SLURM_JOB_ID", "4242".into()),
            ("SLURM_STEP_ID", "0".into()),
            ("SLURM_STEP_NUM_NODES", "2".into()),
            ("SLURM_STEP_NODELIST", "localhost,node2".into()),
            ("SLURMD_NODENAME", node.into()),
            ("HVD_STORE_PORT", port.clone()),
        ])
    };
    let ranks = [slurm(0, "localhost"), slurm(1, "node2")];
    let outs: Vec<Output> = ranks.map(|c| c.wait_with_output().unwrap()).into();
    for (rank, out) in outs.iter().enumerate() {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(rank_line(out), format!("RANK {rank} of 2 sum 3"));
    }
    // Rank 0 placed off the first node is told why the job cannot rendezvous.
    let out = slurm(0, "node2").wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains(
            "init failed: invalid value \"node2\" for SLURMD_NODENAME: expected the step's first node localhost for rank 0, which serves the rendezvous store (use block distribution, or set MASTER_ADDR and MASTER_PORT)"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    not(hvd_have_mpirun),
    ignore = "needs mpirun: apt-get install openmpi-bin"
)]
fn mpirun_starts_a_tcp_job_on_one_host() {
    let mut command = Command::new("mpirun");
    command.args(["--allow-run-as-root", "--oversubscribe", "-np", "2"]);
    // The TCP transport, even in a build that has the MPI one.
    command.args(["-x", "HVD_BACKEND=tcp", "-x", "HVD_START_TIMEOUT=10"]);
    command
        .arg(std::env::current_exe().unwrap())
        .args(RANK_ARGS);
    for name in LAUNCHER_VARIABLES {
        command.env_remove(name);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let mut lines: Vec<String> = text(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("RANK "))
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(lines, ["RANK 0 of 2 sum 3", "RANK 1 of 2 sum 3"]);
}
