//! [`Context`]: one round of an elastic job, as the training function sees it.

use std::sync::Arc;

use hvd_core::{Error, ReduceOp, Result};

use super::State;
use super::worker::Worker;
use crate::Hvd;

/// One round of an elastic job: its runtime, and the commits made so far.
#[derive(Debug)]
pub struct Context {
    hvd: Hvd,
    round: u64,
    /// Commits made so far in the job, the same on every rank after a sync.
    commits: u64,
    /// The host changes hvdrun had announced when the round was formed.
    updates: u64,
    worker: Option<Arc<Worker>>,
}

impl Context {
    pub(crate) fn new(
        hvd: Hvd,
        round: u64,
        commits: u64,
        updates: u64,
        worker: Option<Arc<Worker>>,
    ) -> Context {
        Context {
            hvd,
            round,
            commits,
            updates,
            worker,
        }
    }

    /// This round's runtime: its collectives span the ranks of the round. Do not keep a
    /// clone past the training function: the round ends when it returns.
    pub fn hvd(&self) -> &Hvd {
        &self.hvd
    }

    /// The rendezvous round (0 outside an elastic job).
    pub fn round(&self) -> u64 {
        self.round
    }

    /// How many commits the job has made, whatever rank made them.
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// Commits `state`: saves it in memory, then leaves the round with
    /// [`Error::HostsUpdated`] if hvdrun has announced new or removed hosts, at the
    /// same commit on every rank. Call it every few steps, on every rank.
    pub fn commit(&mut self, state: &mut impl State) -> Result<()> {
        state.save()?;
        self.commits += 1;
        self.check_host_updates()
    }

    /// [`Error::HostsUpdated`] if hvdrun has announced new or removed hosts since the
    /// round was formed. Collective: rank 0 asks hvdrun, and every rank follows its
    /// answer, so all leave at the same step.
    pub fn check_host_updates(&self) -> Result<()> {
        let Some(worker) = &self.worker else {
            return Ok(());
        };
        if !worker.hosts_updated(&self.hvd, self.updates)? {
            return Ok(());
        }
        Err(Error::HostsUpdated {
            rank: self.hvd.rank(),
            round: self.round,
        })
    }

    /// Makes every rank's state the newest committed one: the lowest rank holding the
    /// most commits sends it. Then keeps it as every rank's last commit.
    pub(crate) fn sync(&mut self, state: &mut impl State) -> Result<()> {
        let (root, newest) = newest_root(&self.hvd, self.commits)?;
        state.sync(&self.hvd, root)?;
        self.commits = newest;
        state.save()
    }
}

/// The rank whose state every rank takes when a round starts: the lowest rank holding
/// the newest commit, and that commit's count. Collective over the round; `commits` is
/// how many this rank has made.
pub fn newest_root(hvd: &Hvd, commits: u64) -> Result<(usize, u64)> {
    let rank = hvd.rank();
    let mine = i64::try_from(commits).unwrap_or(i64::MAX);
    let newest = hvd.allreduce("hvd.elastic.commits", vec![mine], ReduceOp::Max)?[0];
    let candidate = if mine == newest {
        rank as i64
    } else {
        i64::MAX
    };
    let root = hvd.allreduce("hvd.elastic.root", vec![candidate], ReduceOp::Min)?[0];
    let root = usize::try_from(root).map_err(|_| {
        Error::invalid(
            rank,
            "elastic sync",
            "hvd.elastic.root",
            format!("no rank holds commit {newest}"),
        )
    })?;
    Ok((root, newest as u64))
}
