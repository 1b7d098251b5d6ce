//! Reading the job and the configuration from the environment, one child process per
//! case so that no test changes its own environment.

use std::process::Command;

use hvd::{Config, World};

const LAUNCHER_VARIABLES: [&str; 26] = [
    "HVD_RANK",
    "HVD_SIZE",
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "RANK",
    "WORLD_SIZE",
    "HVD_STORE_DIR",
    "HOROVOD_STORE_DIR",
    "HVD_STORE_ADDR",
    "HOROVOD_STORE_ADDR",
    "HVD_STORE_PORT",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_JOB_ID",
    "SLURM_NNODES",
    "SLURM_STEP_NUM_NODES",
];

/// Runs the ignored test `child` in a child process with exactly `vars` set among the
/// launcher variables; returns what it printed after `RESULT `.
fn child_with(child: &str, vars: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        child,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    for name in LAUNCHER_VARIABLES {
        cmd.env_remove(name);
    }
    cmd.envs(vars.iter().copied()).env("HVD_TEST_CHILD", "1");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, rest)| rest))
        .unwrap_or("no output")
        .to_string()
}

fn world_with(vars: &[(&str, &str)]) -> String {
    child_with("print_world", vars)
}

fn print_result<T>(result: hvd::Result<T>, show: impl Fn(T) -> String) {
    if std::env::var_os("HVD_TEST_CHILD").is_some() {
        match result {
            Ok(v) => println!("RESULT {}", show(v)),
            Err(e) => println!("RESULT error: {e}"),
        }
    }
}

#[test]
#[ignore = "run by the other tests in a child process"]
fn print_world() {
    print_result(World::from_env(), |w| {
        format!("{} {} {}", w.launcher, w.rank, w.size)
    });
}

#[test]
#[ignore = "run by the other tests in a child process"]
fn print_config() {
    print_result(Config::from_env(), |c| c.to_string().replace('\n', " | "));
}

#[test]
#[ignore = "run by the other tests in a child process"]
fn print_timeline() {
    print_result(Config::from_env(), |c| format!("{:?}", c.timeline));
}

#[test]
#[ignore = "run by the other tests in a child process"]
fn print_init() {
    print_result(hvd::init(), |h| {
        format!("rank {} of {}", h.rank(), h.size())
    });
}

#[test]
fn log_levels_take_horovods_names_and_refuse_others() {
    for level in [
        "warning", "FATAL", "debug", "trace", "info", "error", "warn", "off",
    ] {
        assert_eq!(
            child_with("print_init", &[("HOROVOD_LOG_LEVEL", level)]),
            "rank 0 of 1",
            "{level}"
        );
    }
    let expected = "a log level: one of trace, debug, info, warn, warning, error, fatal, off (for per-module filters use RUST_LOG)";
    assert_eq!(
        child_with("print_init", &[("HOROVOD_LOG_LEVEL", "verbose")]),
        format!("error: invalid value \"verbose\" for HOROVOD_LOG_LEVEL: expected {expected}")
    );
    // Checked even when RUST_LOG decides the filter.
    assert_eq!(
        child_with(
            "print_init",
            &[("HVD_LOG_LEVEL", "warnings"), ("RUST_LOG", "info")]
        ),
        format!("error: invalid value \"warnings\" for HVD_LOG_LEVEL: expected {expected}")
    );
}

#[test]
fn configuration_takes_units_aliases_and_names_bad_values() {
    assert_eq!(
        child_with(
            "print_config",
            &[
                ("HVD_CYCLE_TIME", "2.5"),
                ("HOROVOD_FUSION_THRESHOLD", "64MiB"),
                ("HVD_STALL_CHECK_TIME", "2m"),
                ("HVD_CACHE_CAPACITY", "0"),
                ("HVD_COMPRESSION", "BF16")
            ]
        ),
        "HVD_CYCLE_TIME          2.5ms | HVD_CACHE_CAPACITY      0 | HVD_FUSION_THRESHOLD    64M | HVD_COMPRESSION         bf16 | HVD_STALL_CHECK_TIME    120s | HVD_STALL_SHUTDOWN_TIME 300s"
    );
    assert_eq!(
        child_with("print_config", &[("HOROVOD_STALL_CHECK_DISABLE", "1")]),
        "HVD_CYCLE_TIME          1ms | HVD_CACHE_CAPACITY      1024 | HVD_FUSION_THRESHOLD    128M | HVD_COMPRESSION         none | HVD_STALL_CHECK_TIME    off | HVD_STALL_SHUTDOWN_TIME 300s",
        "the warnings go; a rank that diverged is still failed in the end"
    );
    assert_eq!(
        child_with(
            "print_config",
            &[
                ("HOROVOD_STALL_CHECK_DISABLE", "1"),
                ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "0")
            ]
        ),
        "HVD_CYCLE_TIME          1ms | HVD_CACHE_CAPACITY      1024 | HVD_FUSION_THRESHOLD    128M | HVD_COMPRESSION         none | HVD_STALL_CHECK_TIME    off | HVD_STALL_SHUTDOWN_TIME off"
    );
    assert_eq!(
        child_with("print_config", &[("HVD_FUSION_THRESHOLD", "lots")]),
        format!(
            "error: invalid value \"lots\" for HVD_FUSION_THRESHOLD: expected {}",
            hvd::core::units::BYTE_FORMS
        )
    );
    assert_eq!(
        child_with("print_config", &[("HVD_COMPRESSION", "fp8")]),
        "error: invalid value \"fp8\" for HVD_COMPRESSION: expected none, fp16 or bf16"
    );
    assert_eq!(
        child_with("print_config", &[("HOROVOD_CACHE_CAPACITY", "-3")]),
        "error: invalid value \"-3\" for HOROVOD_CACHE_CAPACITY: expected a number of entries such as 1024 (0 turns the cache off)"
    );
    assert_eq!(
        child_with("print_config", &[("HVD_STALL_CHECK_DISABLE", "maybe")]),
        "error: invalid value \"maybe\" for HVD_STALL_CHECK_DISABLE: expected 1/true/yes/on or 0/false/no/off"
    );
}

#[test]
fn a_dynamic_timeline_writes_no_file_until_the_program_starts_one() {
    assert_eq!(
        child_with("print_timeline", &[("HOROVOD_TIMELINE", "DYNAMIC")]),
        "None"
    );
    assert_eq!(
        child_with("print_timeline", &[("HVD_TIMELINE", "trace.json")]),
        "Some(\"trace.json\")"
    );
}

#[test]
fn each_launcher_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_eq!(world_with(&[]), "none 0 1");
    assert_eq!(
        world_with(&[("HVD_RANK", "1"), ("HVD_SIZE", "2"), ("HVD_STORE_DIR", d)]),
        "hvdrun 1 2"
    );
    assert_eq!(
        world_with(&[
            ("HOROVOD_RANK", "1"),
            ("HOROVOD_SIZE", "2"),
            ("HOROVOD_STORE_DIR", d)
        ]),
        "hvdrun 1 2"
    );
    assert_eq!(
        world_with(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("HVD_STORE_DIR", d)
        ]),
        "Open MPI 3 4"
    );
    assert_eq!(
        world_with(&[("PMI_RANK", "0"), ("PMI_SIZE", "2"), ("HVD_STORE_DIR", d)]),
        "MPICH 0 2"
    );
    assert_eq!(
        world_with(&[
            ("SLURM_PROCID", "2"),
            ("SLURM_NTASKS", "3"),
            ("HVD_STORE_DIR", d)
        ]),
        "Slurm 2 3"
    );
    assert_eq!(
        world_with(&[("RANK", "1"), ("WORLD_SIZE", "8"), ("HVD_STORE_DIR", d)]),
        "torchrun 1 8"
    );
}

#[test]
fn bad_launcher_variables_are_named() {
    assert_eq!(
        world_with(&[("RANK", "one"), ("WORLD_SIZE", "2")]),
        "error: invalid value \"one\" for RANK: expected a whole number"
    );
    assert_eq!(
        world_with(&[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")]),
        "error: invalid value \"4\" for SLURM_PROCID: expected a rank below SLURM_NTASKS=4"
    );
    assert_eq!(
        world_with(&[("OMPI_COMM_WORLD_RANK", "0")]),
        "error: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not: Open MPI sets both; set both, or neither to run one rank on its own"
    );
    assert_eq!(
        world_with(&[("HVD_RANK", "1")]),
        "error: HVD_RANK is set but HVD_SIZE is not: hvdrun sets both; set both, or neither to run one rank on its own"
    );
    assert_eq!(
        world_with(&[("HOROVOD_SIZE", "2")]),
        "error: HOROVOD_SIZE is set but HOROVOD_RANK is not: hvdrun sets both; set both, or neither to run one rank on its own"
    );
    assert_eq!(
        world_with(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")]),
        "error: invalid value \"none found\" for rendezvous: expected a way for the ranks to find each other (rank 0 of 2 was started by Open MPI): start the job with hvdrun, or set MASTER_ADDR and MASTER_PORT (rank 0's host and a free port) on every rank, or HVD_STORE_DIR to a directory every rank can reach"
    );
    assert_eq!(
        world_with(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1")
        ]),
        "error: MASTER_ADDR is set but MASTER_PORT is not: together they give rank 0's host and port for rendezvous"
    );
    assert_eq!(
        world_with(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "70000")
        ]),
        "error: invalid value \"70000\" for MASTER_PORT: expected a TCP port number"
    );
    assert_eq!(
        world_with(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "65535"),
            ("TORCHELASTIC_RUN_ID", "job")
        ]),
        "error: invalid value \"65535\" for MASTER_PORT: expected a port below 65535 (hvd serves on MASTER_PORT + 1 under torchrun; or set HVD_STORE_PORT)"
    );
    assert_eq!(
        world_with(&[
            ("HVD_RANK", "0"),
            ("HVD_SIZE", "2"),
            ("HVD_STORE_ADDR", "nowhere")
        ]),
        "error: invalid value \"nowhere\" for rendezvous address: expected host:port of the rendezvous server (invalid socket address)"
    );
}
