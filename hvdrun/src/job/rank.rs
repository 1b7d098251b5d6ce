//! One rank's process: starting it (here or over ssh, its output read line by line),
//! how it ended, and stopping it.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, sleep};
use std::time::{Duration, Instant};

use hvd_core::units::MAX_DURATION;
use hvd_core::{Error, Result};
use hvd_rendezvous::STORE_ADDR_VAR;

use super::launch::Launch;
use super::spec::Job;
use crate::fabric;
use crate::hosts::Host;
use crate::interrupt;
use crate::outcome::ended;
use crate::output::{Destination, Output, Stream, Tail};
use crate::ssh::travels;

/// How often the launcher looks at its ranks.
pub(super) const POLL: Duration = Duration::from_millis(10);

/// One started rank.
pub(crate) struct Rank {
    /// Its rank, or an elastic worker's `host:slot`.
    label: String,
    pub child: Child,
    /// The host, for a job of several hosts.
    pub host: Option<String>,
    over_ssh: bool,
    /// Over ssh: the wrapper's standard input, whose closing stops the rank.
    remote_stdin: Option<ChildStdin>,
    pub status: Option<ExitStatus>,
    readers: Vec<JoinHandle<()>>,
    tail: Tail,
}

impl Rank {
    pub(crate) fn tail(&self) -> Vec<String> {
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.iter().cloned().collect()
    }

    /// Whether a signal ended it (over ssh: the remote shell's 128 + N).
    pub(crate) fn killed_by_signal(&self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.status.is_some_and(|s| {
            s.signal().is_some() || (self.over_ssh && matches!(s.code(), Some(129..=192)))
        })
    }

    /// How it ended, in words, and its exit code; None while it runs.
    pub(crate) fn ended(&self) -> Option<(String, i32)> {
        self.status.map(|status| ended(status, self.over_ssh))
    }
}

impl Job {
    /// Starts the process labelled `label` (its rank, or an elastic worker's
    /// `host:slot`) on `host`, with `place` (the variables that place it) on top of the
    /// job's variables.
    pub(crate) fn spawn(
        &self,
        label: &str,
        host: &Host,
        place: Vec<(String, String)>,
        launch: &Launch,
    ) -> Result<Rank> {
        let remote = !host.is_this_machine();
        let mut env = self.env.clone();
        env.extend(place);
        let job_var = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(name).ok())
        };
        let fabric = fabric::defaults(job_var);
        env.extend(fabric);
        env.push((STORE_ADDR_VAR.into(), launch.store_addr.clone()));
        if let Some(interface) = &self.interface {
            env.push(("HVD_IFACE".into(), interface.clone()));
        }
        let mut command = if remote {
            // vars_os: a variable that is not UTF-8 must not stop the launch; it stays home.
            let mut travelling: Vec<(String, String)> = std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, _)| travels(k))
                .collect();
            travelling.extend(env);
            let mut command = self.ssh.command(
                &host.name,
                &travelling,
                &launch.dir,
                &self.program,
                &self.args,
                self.grace,
            );
            command.stdin(Stdio::piped());
            command
        } else {
            let mut command = Command::new(&self.program);
            command
                .args(&self.args)
                .envs(env)
                .env("HVD_SECRET", launch.secret)
                .env_remove("HVD_STORE_DIR");
            die_with_launcher(&mut command);
            command
        };
        let tail: Tail = Arc::new(Mutex::new(VecDeque::new()));
        let stdout = match (&self.output, self.quiet) {
            (_, true) => None,
            (Output::Plain, false) => None,
            _ => Some(Destination::open(
                &self.output,
                label,
                Stream::Stdout,
                None,
            )?),
        };
        let stderr = Destination::open(&self.output, label, Stream::Stderr, Some(tail.clone()))?;
        command
            .stdout(match (&stdout, self.quiet) {
                (_, true) => Stdio::null(),
                (Some(_), false) => Stdio::piped(),
                (None, false) => Stdio::inherit(),
            })
            .stderr(Stdio::piped())
            .process_group(0);
        let what = if remote {
            "ssh".into()
        } else {
            format!("`{}`", self.program.display())
        };
        let mut child = command
            .spawn()
            .map_err(|e| Error::io(format!("starting rank {label}: cannot run {what}"), &e))?;
        let mut remote_stdin = child.stdin.take();
        if let Some(stdin) = &mut remote_stdin {
            // The wrapper's first line: the secret, kept out of every command line.
            // A failure here shows as the rank's own ("no job secret arrived").
            let _ = writeln!(stdin, "{}", launch.secret);
        }
        let mut readers = Vec::with_capacity(2);
        if let (Some(dest), Some(pipe)) = (stdout, child.stdout.take()) {
            readers.push(dest.pump(pipe));
        }
        if let Some(pipe) = child.stderr.take() {
            readers.push(stderr.pump(pipe));
        }
        Ok(Rank {
            label: label.to_owned(),
            child,
            host: launch.multi_host.then(|| host.name.clone()),
            over_ssh: remote,
            remote_stdin,
            status: None,
            readers,
            tail,
        })
    }
}

/// A local rank is killed when this launcher dies, however it dies (SIGKILL, the OOM
/// killer, `timeout -k`): otherwise it would run on, reparented to init, holding its
/// GPU and its peers. Remote ranks get the same from their wrapper, which watches its
/// standard input. The signal follows the thread that started the rank, which is
/// [`Job::run`]'s, alive until the job ends.
fn die_with_launcher(command: &mut Command) {
    let launcher = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid, kill), allocating nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The launcher may have died before the request took effect.
            if libc::getppid() != launcher {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            Ok(())
        });
    }
}

/// Stops every rank still running: SIGTERM to its process group, SIGKILL after `grace`;
/// waits for all of them and for their output to be copied. A remote rank is stopped by
/// closing its wrapper's standard input, which does the same there; its ssh gets a
/// second more to bring back the rank's last output and status.
pub(crate) fn stop<'r>(ranks: impl IntoIterator<Item = &'r mut Rank>, grace: Duration) {
    stop_within(ranks, grace, Duration::from_secs(1));
}

/// Ends ranks that are already judged (a failed host's, in an elastic job) at once: no
/// grace, and no time for a remote one's output, which a dead or cut-off host would
/// never send.
pub(crate) fn kill<'r>(ranks: impl IntoIterator<Item = &'r mut Rank>) {
    stop_within(ranks, Duration::ZERO, Duration::ZERO);
}

/// [`stop`], giving remote ranks `margin` more than `grace`.
fn stop_within<'r>(
    ranks: impl IntoIterator<Item = &'r mut Rank>,
    grace: Duration,
    remote_margin: Duration,
) {
    let mut ranks: Vec<&mut Rank> = ranks.into_iter().collect();
    let mut remote = false;
    for rank in ranks.iter_mut().filter(|r| r.status.is_none()) {
        match rank.remote_stdin.take() {
            Some(stdin) => {
                drop(stdin);
                remote = true;
            }
            None => interrupt::signal_group(rank.child.id(), libc::SIGTERM),
        }
    }
    let margin = if remote {
        remote_margin
    } else {
        Duration::ZERO
    };
    // A library caller's grace is not bounded as the command line's is.
    let deadline = Instant::now() + grace.saturating_add(margin).min(MAX_DURATION);
    while !reap(ranks.iter_mut().map(|r| &mut **r)) && Instant::now() < deadline {
        sleep(POLL);
    }
    for rank in ranks.iter_mut() {
        // Also reaches what a rank started and left behind in its group, which would
        // hold its pipes.
        interrupt::signal_group(rank.child.id(), libc::SIGKILL);
    }
    // A process killed in the kernel (a hung driver or network file system) is reaped
    // only once it leaves it, and a process a rank started in a session of its own keeps
    // the rank's output open: neither may keep the launcher from reporting.
    let deadline = Instant::now() + AFTER_KILL;
    let settled = |ranks: &mut Vec<&mut Rank>| {
        reap(ranks.iter_mut().map(|r| &mut **r))
            && ranks
                .iter()
                .all(|r| r.readers.iter().all(|t| t.is_finished()))
    };
    while !settled(&mut ranks) && Instant::now() < deadline {
        sleep(POLL);
    }
    for rank in ranks.iter_mut() {
        if rank.status.is_none() {
            eprintln!(
                "hvdrun: rank {} did not exit within {}s of SIGKILL (held in the kernel by a device driver or a network file system?); hvdrun stops waiting for it",
                rank.label,
                AFTER_KILL.as_secs()
            );
        }
        let (done, open): (Vec<_>, Vec<_>) = rank.readers.drain(..).partition(|t| t.is_finished());
        for reader in done {
            let _ = reader.join();
        }
        if !open.is_empty() && rank.status.is_some() {
            eprintln!(
                "hvdrun: rank {} exited, but a process it started outside its process group (setsid, a daemon) still holds its output open; hvdrun stops waiting for that output",
                rank.label
            );
        }
    }
}

/// How long the launcher waits, after SIGKILL, for a rank to be reaped and its output
/// to close.
const AFTER_KILL: Duration = Duration::from_secs(5);

/// Notes the exit of each rank that has ended since it was last looked at; true when
/// every one has.
pub(super) fn reap<'r>(ranks: impl IntoIterator<Item = &'r mut Rank>) -> bool {
    let mut all = true;
    for rank in ranks {
        if rank.status.is_none()
            && let Ok(Some(status)) = rank.child.try_wait()
        {
            rank.status = Some(status);
        }
        all &= rank.status.is_some();
    }
    all
}
