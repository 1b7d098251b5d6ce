//! Running every rank of a job as a child process on this host.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::Duration;

use hvd_core::{Error, Result};

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every rank exited with status 0.
    Success,
    /// `rank` was the first to fail, with this status; the others were stopped.
    Failed { rank: usize, status: String },
}

/// N ranks of one command on this host.
#[derive(Debug)]
pub struct LocalJob {
    program: PathBuf,
    args: Vec<String>,
    np: usize,
    env: Vec<(String, String)>,
    quiet: bool,
}

/// A scratch directory removed when dropped.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| Error::Io {
        context: "generating the job secret".into(),
        message: e.to_string(),
        kind: std::io::ErrorKind::Other,
    })?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exit code {code}"),
        None => status.to_string(),
    }
}

impl LocalJob {
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>, np: usize) -> Self {
        LocalJob {
            program: program.into(),
            args,
            np,
            env: Vec::new(),
            quiet: false,
        }
    }

    /// Discards the ranks' standard output (their standard error still shows).
    pub fn quiet(mut self) -> Self {
        self.quiet = true;
        self
    }

    /// Sets an environment variable for every rank.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Starts every rank and waits for the job to end.
    pub fn run(&self) -> Result<JobOutcome> {
        let secret = random_hex(16)?;
        let dir = ScratchDir(std::env::temp_dir().join(format!(
            "hvd-job-{}-{}",
            std::process::id(),
            random_hex(4)?
        )));
        std::fs::create_dir_all(&dir.0)
            .map_err(|e| Error::io(format!("creating {}", dir.0.display()), &e))?;
        let mut children = Vec::with_capacity(self.np);
        for rank in 0..self.np {
            let child = Command::new(&self.program)
                .args(&self.args)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .env("HVD_RANK", rank.to_string())
                .env("HVD_SIZE", self.np.to_string())
                .env("HVD_LOCAL_RANK", rank.to_string())
                .env("HVD_LOCAL_SIZE", self.np.to_string())
                .env("HVD_STORE_DIR", &dir.0)
                .env("HVD_SECRET", &secret)
                .stdout(if self.quiet {
                    Stdio::null()
                } else {
                    Stdio::inherit()
                })
                .spawn();
            match child {
                Ok(child) => children.push(child),
                Err(e) => {
                    stop(&mut children);
                    return Err(Error::io(
                        format!("starting rank {rank}: {}", self.program.display()),
                        &e,
                    ));
                }
            }
        }
        supervise(children)
    }
}

/// Waits for every child; on the first failure stops the rest and names it.
fn supervise(mut children: Vec<Child>) -> Result<JobOutcome> {
    let mut done = vec![false; children.len()];
    while done.iter().any(|d| !d) {
        for (rank, child) in children.iter_mut().enumerate() {
            if done[rank] {
                continue;
            }
            let status = child
                .try_wait()
                .map_err(|e| Error::io(format!("waiting for rank {rank}"), &e))?;
            if let Some(status) = status {
                done[rank] = true;
                if !status.success() {
                    stop(&mut children);
                    return Ok(JobOutcome::Failed {
                        rank,
                        status: describe(status),
                    });
                }
            }
        }
        sleep(Duration::from_millis(10));
    }
    Ok(JobOutcome::Success)
}

fn stop(children: &mut [Child]) {
    for child in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}
