//! Running a test of this binary as the ranks of an `mpirun` job.
//!
//! The test calls [`job`] with its own name; `mpirun` starts the binary again once per
//! rank with `--exact <test>`, and in those ranks [`rank_body`] is true.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// True inside a rank that `mpirun` started (Open MPI or MPICH variables).
pub fn rank_body() -> bool {
    std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_SIZE").is_some()
}

/// True in rank 0 of the job, from the launcher's variables (Open MPI's or MPICH's):
/// for what must be decided before hvd knows the rank.
// Not every test binary that includes this module asks.
#[allow(dead_code)]
pub fn is_rank_0() -> bool {
    let rank = std::env::var("OMPI_COMM_WORLD_RANK").or_else(|_| std::env::var("PMI_RANK"));
    rank.as_deref() == Ok("0")
}

/// What a finished job left: its exit status (None: killed at the deadline) and the
/// output of every rank and of mpirun, interleaved.
pub struct Outcome {
    pub status: Option<ExitStatus>,
    pub output: String,
    pub took: Duration,
}

/// Runs `test` of this binary as `np` ranks under mpirun, with extra environment; kills
/// the job at `deadline`.
pub fn job(test: &str, np: usize, env: &[(&str, &str)], deadline: Duration) -> Outcome {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = Command::new("mpirun");
    command
        .args(["-np", &np.to_string(), "--oversubscribe"])
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        // Containers and CI run as root, which Open MPI refuses unless told.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the deadline reaches the ranks and helpers that
        // hold the output pipes, not just mpirun.
        .process_group(0);
    for (name, value) in env {
        command.env(name, value);
    }
    let start = Instant::now();
    let mut child = command
        .spawn()
        .expect("mpirun starts (is Open MPI installed?)");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for mpirun") {
            break Some(status);
        }
        if start.elapsed() > deadline {
            // SAFETY: kill with a valid signal on the group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let output = format!(
        "{}{}",
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default()
    );
    Outcome {
        status,
        output,
        took,
    }
}
