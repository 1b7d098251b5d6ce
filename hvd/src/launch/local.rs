//! Running every rank of a job as a child process on this host.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, sleep};
use std::time::{Duration, Instant};

use hvd_core::store::FileStore;
use hvd_core::{Error, Result, Store};

use super::interrupt;
use super::output::{Destination, Output, Stream, Tail};

/// The store counter every rank adds 1 to once its transport is connected.
pub const CHECKIN_KEY: &str = "hvd.checkin";

/// The store key rank `rank` sets once its transport is connected.
pub fn checkin_key(rank: usize) -> String {
    format!("{CHECKIN_KEY}.{rank}")
}

const POLL: Duration = Duration::from_millis(10);

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every rank exited with status 0.
    Success,
    /// `rank` was the first to fail, with this status; the others were stopped.
    Failed {
        rank: usize,
        /// "exit code 3" or "killed by signal 9".
        status: String,
        /// The exit code, 128 + the signal for a rank killed by a signal.
        exit_code: i32,
        /// The last lines (up to 10) of the rank's standard error.
        stderr_tail: Vec<String>,
    },
    /// SIGINT or SIGTERM reached the launcher; `stopped` ranks were still running.
    Interrupted { stopped: usize },
    /// Not every rank connected within the start timeout; the job was stopped.
    StartTimeout {
        timeout: Duration,
        missing: Vec<MissingRank>,
    },
}

/// A rank that did not check in before the start timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingRank {
    pub rank: usize,
    /// How it had ended, if it had ("exit code 2"); None: it was still running.
    pub exited: Option<String>,
    pub stderr_tail: Vec<String>,
}

impl JobOutcome {
    /// The exit status a launcher should end with: 0, the failed rank's code, 130 when
    /// interrupted, 1 when the job did not start.
    pub fn exit_code(&self) -> i32 {
        match self {
            JobOutcome::Success => 0,
            JobOutcome::Failed { exit_code, .. } => *exit_code,
            JobOutcome::Interrupted { .. } => 130,
            JobOutcome::StartTimeout { .. } => 1,
        }
    }
}

fn write_tail(f: &mut std::fmt::Formatter<'_>, intro: &str, tail: &[String]) -> std::fmt::Result {
    if tail.is_empty() {
        return write!(f, " It wrote nothing to stderr.");
    }
    write!(f, " {intro}")?;
    for line in tail {
        write!(f, "\n    {line}")?;
    }
    Ok(())
}

/// The summary a user reads, without a program-name prefix.
impl std::fmt::Display for JobOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobOutcome::Success => write!(f, "every rank exited successfully"),
            JobOutcome::Failed {
                rank,
                status,
                stderr_tail,
                ..
            } => {
                write!(
                    f,
                    "rank {rank} failed first ({status}); the other ranks were stopped."
                )?;
                write_tail(f, "Last lines of its stderr:", stderr_tail)
            }
            JobOutcome::Interrupted { stopped } => {
                write!(f, "interrupted; stopped {stopped} ranks")
            }
            JobOutcome::StartTimeout { timeout, missing } => {
                let ranks: Vec<String> = missing.iter().map(|m| m.rank.to_string()).collect();
                let noun = if ranks.len() == 1 { "rank" } else { "ranks" };
                write!(
                    f,
                    "{noun} {} did not connect within {}s; the job was stopped.",
                    ranks.join(", "),
                    timeout.as_secs_f64(),
                )?;
                for m in missing {
                    match &m.exited {
                        None => write!(
                            f,
                            "\n  rank {}: still running (did it call hvd::init()?)",
                            m.rank
                        )?,
                        Some(status) => {
                            write!(f, "\n  rank {}: exited ({status}).", m.rank)?;
                            write_tail(f, "Last lines of its stderr:", &m.stderr_tail)?;
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

/// N ranks of one command on this host.
///
/// Every rank inherits this process's environment, runs in its own process group (so
/// stopping a rank stops what it started), and has its standard error read line by line
/// so a failure can be reported with its last lines.
#[derive(Debug)]
pub struct LocalJob {
    program: PathBuf,
    args: Vec<String>,
    np: usize,
    env: Vec<(String, String)>,
    quiet: bool,
    output: Output,
    grace: Duration,
    start_timeout: Option<Duration>,
    handle_interrupts: bool,
    progress: Option<String>,
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
    if let Some(signal) = status.signal() {
        return format!("killed by signal {signal}");
    }
    match status.code() {
        Some(code) => format!("exit code {code}"),
        None => status.to_string(),
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    }
}

/// One started rank.
struct Rank {
    child: Child,
    status: Option<ExitStatus>,
    readers: Vec<JoinHandle<()>>,
    tail: Tail,
}

impl Rank {
    fn tail(&self) -> Vec<String> {
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.iter().cloned().collect()
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
            output: Output::Plain,
            grace: Duration::from_secs(5),
            start_timeout: None,
            handle_interrupts: false,
            progress: None,
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

    /// Where the ranks' output goes (default: [`Output::Plain`]).
    pub fn output(mut self, output: Output) -> Self {
        self.output = output;
        self
    }

    /// How long stopped ranks get between SIGTERM and SIGKILL (default 5 s).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Stops the job unless every rank has connected (called `hvd::init()`) this soon.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = Some(timeout);
        self
    }

    /// On SIGINT or SIGTERM to this process, stops the ranks and ends in
    /// [`JobOutcome::Interrupted`]. The handlers stay for the process's life: for
    /// launcher programs, which exit after the job.
    pub fn handle_interrupts(mut self) -> Self {
        self.handle_interrupts = true;
        self
    }

    /// Shows `name: 3/4 ranks connected` on standard error while ranks start, and the
    /// interruption as it happens.
    pub fn progress(mut self, name: impl Into<String>) -> Self {
        self.progress = Some(name.into());
        self
    }

    /// Starts every rank and waits for the job to end.
    pub fn run(&self) -> Result<JobOutcome> {
        if self.handle_interrupts {
            interrupt::install()?;
        }
        let secret = random_hex(16)?;
        let dir = ScratchDir(std::env::temp_dir().join(format!(
            "hvd-job-{}-{}",
            std::process::id(),
            random_hex(4)?
        )));
        std::fs::create_dir_all(&dir.0)
            .map_err(|e| Error::io(format!("creating {}", dir.0.display()), &e))?;
        let mut ranks = Vec::with_capacity(self.np);
        for rank in 0..self.np {
            match self.spawn(rank, &dir.0, &secret) {
                Ok(r) => ranks.push(r),
                Err(e) => {
                    stop(&mut ranks, Duration::ZERO);
                    return Err(e);
                }
            }
        }
        let store = FileStore::new(&dir.0)?;
        let outcome = self.supervise(&mut ranks, &store);
        if outcome.is_err() {
            stop(&mut ranks, Duration::ZERO);
        }
        outcome
    }

    fn spawn(&self, rank: usize, store_dir: &std::path::Path, secret: &str) -> Result<Rank> {
        let tail: Tail = Arc::new(Mutex::new(VecDeque::new()));
        let stdout = match (&self.output, self.quiet) {
            (_, true) => None,
            (Output::Plain, false) => None,
            _ => Some(Destination::open(&self.output, rank, Stream::Stdout, None)?),
        };
        let stderr = Destination::open(&self.output, rank, Stream::Stderr, Some(tail.clone()))?;
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("HVD_RANK", rank.to_string())
            .env("HVD_SIZE", self.np.to_string())
            .env("HVD_LOCAL_RANK", rank.to_string())
            .env("HVD_LOCAL_SIZE", self.np.to_string())
            .env("HVD_STORE_DIR", store_dir)
            .env("HVD_SECRET", secret)
            .stdout(match (&stdout, self.quiet) {
                (_, true) => Stdio::null(),
                (Some(_), false) => Stdio::piped(),
                (None, false) => Stdio::inherit(),
            })
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command.spawn().map_err(|e| {
            Error::io(
                format!(
                    "starting rank {rank}: cannot run `{}`",
                    self.program.display()
                ),
                &e,
            )
        })?;
        let mut readers = Vec::with_capacity(2);
        if let (Some(dest), Some(pipe)) = (stdout, child.stdout.take()) {
            readers.push(dest.pump(pipe));
        }
        if let Some(pipe) = child.stderr.take() {
            readers.push(stderr.pump(pipe));
        }
        Ok(Rank {
            child,
            status: None,
            readers,
            tail,
        })
    }

    /// Waits for every rank; on the first failure, an interrupt or the start timeout,
    /// stops the rest.
    fn supervise(&self, ranks: &mut [Rank], store: &FileStore) -> Result<JobOutcome> {
        let started = Instant::now();
        let mut checkin = self.start_timeout.map(|t| CheckinWatch {
            timeout: t,
            shown: 0,
            terminal: std::io::stderr().is_terminal(),
        });
        loop {
            if self.handle_interrupts && interrupt::interrupted() {
                let running = ranks.iter().filter(|r| r.status.is_none()).count();
                if let Some(name) = &self.progress {
                    eprintln!("{name}: interrupted; stopping {running} ranks");
                }
                stop(ranks, self.grace);
                return Ok(JobOutcome::Interrupted { stopped: running });
            }
            for rank in 0..ranks.len() {
                if ranks[rank].status.is_some() {
                    continue;
                }
                let status = ranks[rank]
                    .child
                    .try_wait()
                    .map_err(|e| Error::io(format!("waiting for rank {rank}"), &e))?;
                if let Some(status) = status {
                    ranks[rank].status = Some(status);
                    if !status.success() {
                        if let Some(watch) = &checkin {
                            watch.finish();
                        }
                        stop(ranks, self.grace);
                        return Ok(JobOutcome::Failed {
                            rank,
                            status: describe(status),
                            exit_code: exit_code(status),
                            stderr_tail: ranks[rank].tail(),
                        });
                    }
                }
            }
            if ranks.iter().all(|r| r.status.is_some()) {
                if let Some(watch) = &checkin {
                    watch.finish();
                }
                stop(ranks, Duration::ZERO);
                return Ok(JobOutcome::Success);
            }
            if let Some(watch) = &mut checkin {
                let connected = connected(store);
                if connected >= self.np {
                    watch.show(self.progress.as_deref(), connected, self.np);
                    watch.finish();
                    checkin = None;
                } else if started.elapsed() >= watch.timeout {
                    watch.finish();
                    let timeout = watch.timeout;
                    // Which ranks had ended on their own, before stopping ends the rest.
                    let exited: Vec<Option<String>> =
                        ranks.iter().map(|r| r.status.map(describe)).collect();
                    stop(ranks, self.grace);
                    let missing = (0..ranks.len())
                        .filter(|&r| !matches!(store.try_get(&checkin_key(r)), Ok(Some(_))))
                        .map(|r| MissingRank {
                            rank: r,
                            exited: exited[r].clone(),
                            stderr_tail: ranks[r].tail(),
                        })
                        .collect();
                    return Ok(JobOutcome::StartTimeout { timeout, missing });
                } else {
                    watch.show(self.progress.as_deref(), connected, self.np);
                }
            }
            sleep(POLL);
        }
    }
}

fn connected(store: &FileStore) -> usize {
    match store.try_get(CHECKIN_KEY) {
        Ok(Some(bytes)) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// The start-up progress line and deadline.
struct CheckinWatch {
    timeout: Duration,
    shown: usize,
    terminal: bool,
}

impl CheckinWatch {
    fn show(&mut self, name: Option<&str>, connected: usize, np: usize) {
        let Some(name) = name else { return };
        if connected == self.shown {
            return;
        }
        self.shown = connected;
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r{name}: {connected}/{np} ranks connected")
        } else {
            writeln!(err, "{name}: {connected}/{np} ranks connected")
        };
        let _ = err.flush();
    }

    /// Ends an overwritten progress line, so what follows starts on a line of its own.
    fn finish(&self) {
        if self.terminal && self.shown > 0 {
            eprintln!();
        }
    }
}

/// Stops every rank still running: SIGTERM to its process group, SIGKILL after `grace`;
/// waits for all of them and for their output to be copied.
fn stop(ranks: &mut [Rank], grace: Duration) {
    for rank in ranks.iter().filter(|r| r.status.is_none()) {
        interrupt::signal_group(rank.child.id(), libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    loop {
        for rank in ranks.iter_mut().filter(|r| r.status.is_none()) {
            if let Ok(Some(status)) = rank.child.try_wait() {
                rank.status = Some(status);
            }
        }
        if ranks.iter().all(|r| r.status.is_some()) || Instant::now() >= deadline {
            break;
        }
        sleep(POLL);
    }
    for rank in ranks.iter_mut() {
        // Also reaches what a rank started and left behind, which would hold its pipes.
        interrupt::signal_group(rank.child.id(), libc::SIGKILL);
        if rank.status.is_none() {
            rank.status = rank.child.wait().ok();
        }
        for reader in rank.readers.drain(..) {
            let _ = reader.join();
        }
    }
}
