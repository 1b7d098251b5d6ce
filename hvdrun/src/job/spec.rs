//! What a job runs, and where: the [`Job`] type and its builder.

use std::path::PathBuf;
use std::time::Duration;

use crate::hosts::Host;
use crate::output::Output;
use crate::ssh::Ssh;

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
    pub(super) program: PathBuf,
    pub(super) args: Vec<String>,
    pub(super) np: usize,
    pub(super) env: Vec<(String, String)>,
    pub(super) quiet: bool,
    pub(super) output: Output,
    pub(crate) grace: Duration,
    pub(super) start_timeout: Option<Duration>,
    pub(crate) handle_interrupts: bool,
    pub(crate) progress: Option<String>,
    pub(super) hosts: Option<Vec<Host>>,
    pub(super) ssh: Ssh,
    pub(super) interface: Option<String>,
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
    /// [`JobOutcome::Interrupted`](crate::outcome::JobOutcome::Interrupted). The handlers stay for the process's life: for
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
}
