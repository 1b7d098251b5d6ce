//! Running every rank of a job: directly on this host, over ssh on others. The builder
//! and [`Job::run`] are here; what a run shares and hands each rank is in [`launch`],
//! starting and stopping one rank's process in [`rank`], waiting for the ranks and
//! judging a failure in [`supervise`], the start-up progress line in [`progress`].

mod launch;
mod progress;
mod rank;
mod supervise;

use std::path::PathBuf;
use std::time::Duration;

use hvd_core::Result;

pub(crate) use self::launch::Launch;
pub(crate) use self::rank::{Rank, kill, stop};
use super::hosts::{Host, place};
use super::interrupt;
use super::outcome::JobOutcome;
use super::output::Output;
use super::ssh::Ssh;

/// How often the launcher looks at its ranks.
const POLL: Duration = Duration::from_millis(10);

/// N ranks of one command, on this host or on several.
///
/// The job serves its ranks' rendezvous store
/// ([`StoreServer`](hvd_rendezvous::StoreServer)) and hands each rank its address and a
/// secret made for this job. A rank on this host inherits this process's
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
}
