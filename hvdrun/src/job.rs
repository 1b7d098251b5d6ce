//! Running every rank of a job: directly on this host, over ssh on others. What runs where,
//! and the builder, is in [`spec`]; [`Job::run`] is here; what a run shares and hands each rank is in [`launch`],
//! starting and stopping one rank's process in [`rank`], waiting for the ranks and
//! judging a failure in [`supervise`], the start-up progress line in [`progress`].

mod launch;
mod progress;
mod rank;
mod spec;
mod supervise;

use std::time::Duration;

use hvd_core::Result;

pub(crate) use self::launch::Launch;
pub(crate) use self::rank::{Rank, kill, stop};
pub use self::spec::Job;
use super::hosts::{Host, place};
use super::interrupt;
use super::outcome::JobOutcome;

impl Job {
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
