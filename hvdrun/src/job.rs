//! Running every rank of a job: directly on this host, over ssh on others.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, sleep};
use std::time::{Duration, Instant};

use hvd_core::{Error, MemoryStore, Result, Store};

use super::fabric;
use super::hosts::{Host, Placement, place};
use super::interrupt;
use super::outcome::{JobOutcome, MissingRank, ended};
use super::output::{Destination, Output, Stream, Tail};
use super::ssh::{Ssh, travels};
use super::verdict::{Seen, Verdict, verdict};
use hvd_rendezvous::{CHECKIN_KEY, STORE_ADDR_VAR, StoreServer, checkin_key, lost_by};

const POLL: Duration = Duration::from_millis(10);

/// What every rank of one run shares.
pub(crate) struct Launch<'a> {
    /// Whether the ranks are on more than one host (summaries then name the host).
    pub multi_host: bool,
    pub store_addr: String,
    pub secret: &'a str,
    /// The launcher's directory, where remote ranks start when their host has it.
    pub dir: PathBuf,
}

/// N ranks of one command, on this host or on several.
///
/// The job serves its ranks' rendezvous store ([`StoreServer`]) and hands each rank its
/// address and a secret made for this job. A rank on this host inherits this process's
/// environment and runs in its own process group (so stopping a rank stops what it
/// started); a rank on another host is started over ssh with the variables that travel
/// (`HVD_*`, `HOROVOD_*`, `PATH`, `LD_LIBRARY_PATH`, `RUST_LOG`, and those set with
/// [`env`](Job::env)), and cannot outlive the job (see [`Ssh`]). Every rank's standard
/// error is read line by line, so a failure can be reported with its last lines.
#[derive(Debug)]
pub struct Job {
    program: PathBuf,
    args: Vec<String>,
    np: usize,
    env: Vec<(String, String)>,
    quiet: bool,
    output: Output,
    pub(crate) grace: Duration,
    start_timeout: Option<Duration>,
    pub(crate) handle_interrupts: bool,
    pub(crate) progress: Option<String>,
    hosts: Option<Vec<Host>>,
    ssh: Ssh,
    interface: Option<String>,
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

/// One started rank.
pub(crate) struct Rank {
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
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>, np: usize) -> Self {
        Job {
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
            hosts: None,
            ssh: Ssh::default(),
            interface: None,
        }
    }

    /// The hosts to run on (default: `np` ranks on this host). Hosts that name this
    /// machine are started directly, the others over ssh.
    pub fn hosts(mut self, hosts: Vec<Host>) -> Self {
        self.hosts = Some(hosts);
        self
    }

    /// How to reach the other hosts.
    pub fn ssh(mut self, ssh: Ssh) -> Self {
        self.ssh = ssh;
        self
    }

    /// The network interfaces the job uses (`eth0` or `eth0,ib0`, the first each host
    /// has): the ranks' transport (`HVD_IFACE`) and the rendezvous server's address.
    pub fn network_interface(mut self, names: impl Into<String>) -> Self {
        self.interface = Some(names.into());
        self
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

    /// Stops the job unless every rank has connected (reached the rendezvous through
    /// `hvd::init()` or `hvd::World::from_env()`) this soon.
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
        let hosts = self.hosts.clone().unwrap_or_else(|| {
            vec![Host {
                name: "localhost".into(),
                slots: self.np,
            }]
        });
        let placements = place(&hosts, self.np)?;
        let (secret, server) = self.serve(&hosts)?;
        let launch = self.launch(
            &server,
            &secret,
            placements.windows(2).any(|w| w[0].host != w[1].host),
        )?;
        let cross_size = placements.last().map_or(0, |p| p.host + 1);
        let mut ranks = Vec::with_capacity(self.np);
        for (rank, placement) in placements.iter().enumerate() {
            let host = &hosts[placement.host];
            let env = self.rank_env(rank, host, placement, cross_size);
            match self.spawn(&rank.to_string(), host, env, &launch) {
                Ok(r) => ranks.push(r),
                Err(e) => {
                    stop(&mut ranks, Duration::ZERO);
                    return Err(e);
                }
            }
        }
        let outcome = self.supervise(&mut ranks, server.store().as_ref());
        if outcome.is_err() {
            stop(&mut ranks, Duration::ZERO);
        }
        outcome
    }

    /// What every rank of a run started through `server` shares.
    pub(crate) fn launch<'a>(
        &self,
        server: &StoreServer,
        secret: &'a str,
        multi_host: bool,
    ) -> Result<Launch<'a>> {
        Ok(Launch {
            multi_host,
            store_addr: server.addr().to_string(),
            secret,
            dir: std::env::current_dir()
                .map_err(|e| Error::io("reading the current directory", &e))?,
        })
    }

    /// A fresh secret and the rendezvous server of a run on `hosts`, which every rank
    /// proves it knows.
    pub(crate) fn serve(&self, hosts: &[Host]) -> Result<(String, StoreServer)> {
        let secret = random_hex(16)?;
        let server = StoreServer::start(self.server_address(hosts)?, secret.as_bytes())?;
        Ok((secret, server))
    }

    /// The variables that place rank `rank` of a job of fixed size, under hvd's names
    /// and Horovod's (`HOROVOD_RANK`, ...), which programs written for Horovod read.
    fn rank_env(
        &self,
        rank: usize,
        host: &Host,
        placement: &Placement,
        cross_size: usize,
    ) -> Vec<(String, String)> {
        let place = [
            ("RANK", rank.to_string()),
            ("SIZE", self.np.to_string()),
            ("LOCAL_RANK", placement.local_rank.to_string()),
            ("LOCAL_SIZE", placement.local_size.to_string()),
            ("CROSS_RANK", placement.host.to_string()),
            ("CROSS_SIZE", cross_size.to_string()),
            ("HOSTNAME", host.name.clone()),
        ];
        ["HVD", "HOROVOD"]
            .iter()
            .flat_map(|prefix| {
                place
                    .iter()
                    .map(move |(name, value)| (format!("{prefix}_{name}"), value.clone()))
            })
            .collect()
    }

    /// Where the rendezvous server listens: loopback for a job on this host alone,
    /// otherwise an address the other hosts can reach (of `--network-interface`, or the
    /// first routable address of a physical-looking interface).
    fn server_address(&self, hosts: &[Host]) -> Result<SocketAddr> {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        if hosts.iter().all(Host::is_this_machine) {
            return Ok(loopback);
        }
        let interfaces = hvd_core::net::interfaces()?;
        let plan = hvd_core::net::listen_plan(
            &interfaces,
            self.interface.as_deref(),
            "--network-interface",
        )?;
        if let Some(ip) = plan.publish.first() {
            return Ok(SocketAddr::new(*ip, 0));
        }
        let all_loopback = hosts.iter().all(|h| {
            h.is_this_machine() || h.name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        });
        if all_loopback {
            return Ok(loopback);
        }
        Err(Error::Config {
            name: "--network-interface".into(),
            value: "unset".into(),
            expected: "an interface other hosts can reach this one on: this host has no routable address outside loopback and container bridges".into(),
        })
    }

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
            child,
            host: launch.multi_host.then(|| host.name.clone()),
            over_ssh: remote,
            remote_stdin,
            status: None,
            readers,
            tail,
        })
    }

    /// Waits for every rank; on the first failure, an interrupt or the start timeout,
    /// stops the rest.
    fn supervise(&self, ranks: &mut [Rank], store: &MemoryStore) -> Result<JobOutcome> {
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
                stop(ranks.iter_mut(), self.grace);
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
                        self.end_progress(checkin.as_mut(), store);
                        return Ok(self.failure(ranks, store, rank));
                    }
                }
            }
            if ranks.iter().all(|r| r.status.is_some()) {
                self.end_progress(checkin.as_mut(), store);
                stop(ranks.iter_mut(), Duration::ZERO);
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
                    let exited: Vec<Option<String>> = ranks
                        .iter()
                        .map(|r| r.ended().map(|(text, _)| text))
                        .collect();
                    stop(ranks.iter_mut(), self.grace);
                    let missing = (0..ranks.len())
                        .filter(|&r| !matches!(store.try_get(&checkin_key(r)), Ok(Some(_))))
                        .map(|r| MissingRank {
                            rank: r,
                            host: ranks[r].host.clone(),
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

impl Job {
    /// Shows the last count of ranks that checked in and ends the progress line, when a
    /// job ends while it is still shown: a job that ends between two polls still says
    /// how many of its ranks connected.
    fn end_progress(&self, watch: Option<&mut CheckinWatch>, store: &MemoryStore) {
        if let Some(watch) = watch {
            watch.show(self.progress.as_deref(), connected(store), self.np);
            watch.finish();
        }
    }

    /// The outcome of a job whose first failure this launcher saw on rank `first`: lets
    /// the other exits arrive, finds the root cause among them, then stops the rest.
    fn failure(&self, ranks: &mut [Rank], store: &MemoryStore, first: usize) -> JobOutcome {
        settle(ranks);
        let seen: Vec<Seen> = (0..ranks.len())
            .map(|r| Seen {
                failed: ranks[r].status.is_some_and(|s| !s.success()),
                killed_by_signal: ranks[r].killed_by_signal(),
                lost: lost_by(store, r),
            })
            .collect();
        let Verdict { root, lost_by } = verdict(&seen, first);
        let (status, exit_code) = ranks[root].ended().unwrap_or_else(|| {
            (
                "still running when its peers lost it: frozen, stopped, stuck or cut off from them?".into(),
                1,
            )
        });
        let stopped = ranks
            .iter()
            .enumerate()
            .filter(|(r, rank)| *r != root && rank.status.is_none())
            .count();
        stop(ranks.iter_mut(), self.grace);
        JobOutcome::Failed {
            rank: root,
            host: ranks[root].host.clone(),
            status,
            exit_code,
            stderr_tail: ranks[root].tail(),
            lost_by,
            stopped,
        }
    }
}

/// How long the launcher waits, after the first failure, for the other ranks' exits:
/// peers of a dead rank fail within milliseconds, and their reports name it.
const SETTLE: Duration = Duration::from_millis(500);

/// Reaps exits until every rank has ended or [`SETTLE`] has passed.
fn settle(ranks: &mut [Rank]) {
    let deadline = Instant::now() + SETTLE;
    loop {
        for rank in ranks.iter_mut().filter(|r| r.status.is_none()) {
            if let Ok(Some(status)) = rank.child.try_wait() {
                rank.status = Some(status);
            }
        }
        if ranks.iter().all(|r| r.status.is_some()) || Instant::now() >= deadline {
            return;
        }
        sleep(Duration::from_millis(5));
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

fn connected(store: &MemoryStore) -> usize {
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
    let deadline = Instant::now() + grace + margin;
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
