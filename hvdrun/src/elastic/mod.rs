//! Elastic jobs: a job that goes on when a host dies or leaves, and grows when one is
//! added.
//!
//! hvdrun starts one worker per slot of every host it may use (a fixed list with
//! `--elastic -H ...`, or what `--host-discovery-script` prints, asked every second)
//! and forms rendezvous rounds from them (see `hvd_rendezvous::elastic`): it alone
//! decides each round's members and ranks, and writes them to the job's store. Workers
//! keep their order from round to round; new ones are appended.
//!
//! When a round fails, hvdrun waits for the survivors' reports, finds the root cause
//! among them (the rank the others lost, following chains of losses; the same verdict
//! as a job of fixed size), and charges that rank's host alone: its workers are stopped
//! and the host is kept out for a cooldown that doubles with each of its failures
//! within `--blacklist-cooldown-range`, then let back in. The next round is formed from
//! every other worker once each survivor has left the failed round. When hosts are
//! added or removed, hvdrun tells the workers (their next commit leaves the round),
//! starts workers on the new hosts, and the next round includes them; workers of a
//! removed host find no place in it and exit 0.
//!
//! Below `--min-np` workers the job waits for hosts, up to `--elastic-timeout`, then
//! fails naming the slots it had and each host's state; past `--reset-limit` new
//! rounds it fails naming the limit. A worker that reports an error no round cures (a
//! mismatch, a bad argument) ends the job with it, without a reset.

mod blacklist;
mod discovery;
mod supervisor;

use std::time::Duration;

use hvd_core::Result;

pub use discovery::HostSource;

use crate::{Job, JobOutcome};

/// How an elastic job grows, shrinks and gives up (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Elastic {
    source: HostSource,
    min_np: usize,
    max_np: usize,
    timeout: Duration,
    reset_limit: Option<usize>,
    cooldown: (Duration, Duration),
    discovery_interval: Duration,
}

impl Elastic {
    /// Hosts from `source`, at least `min_np` workers (1 or more), at most as many as
    /// the hosts have slots; a 600 s elastic timeout, no reset limit, cooldowns from 30 s
    /// to 10 min, discovery every second.
    pub fn new(source: HostSource, min_np: usize) -> Elastic {
        Elastic {
            source,
            min_np: min_np.max(1),
            max_np: usize::MAX,
            timeout: Duration::from_secs(600),
            reset_limit: None,
            cooldown: (Duration::from_secs(30), Duration::from_secs(600)),
            discovery_interval: Duration::from_secs(1),
        }
    }

    /// At most `max_np` workers in a round.
    pub fn max_np(mut self, max_np: usize) -> Self {
        self.max_np = max_np.max(self.min_np);
        self
    }

    /// How long the job waits for enough slots (and workers for a round) before it
    /// fails.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many new rounds after the first the job may form before it fails.
    pub fn reset_limit(mut self, limit: usize) -> Self {
        self.reset_limit = Some(limit);
        self
    }

    /// A failed host is kept out for `least`, doubled with each further failure, at
    /// most `most`.
    pub fn cooldown(mut self, least: Duration, most: Duration) -> Self {
        self.cooldown = (least, most.max(least));
        self
    }

    /// How often the discovery script is asked.
    pub fn discovery_interval(mut self, interval: Duration) -> Self {
        self.discovery_interval = interval;
        self
    }
}

impl Job {
    /// Runs the job elastically (see [`Elastic`]); `-np` is ignored. The ranks' lines
    /// are tagged with their worker's `host:slot`, which names it for as long as it
    /// lives, whatever its rank in a round.
    pub fn run_elastic(&self, elastic: &Elastic) -> Result<JobOutcome> {
        supervisor::run(self, elastic)
    }
}
