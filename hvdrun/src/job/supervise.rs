//! Waiting for the ranks of a job, and judging its first failure.

use std::thread::sleep;
use std::time::{Duration, Instant};

use hvd_core::{Error, MemoryStore, Result, Store};
use hvd_rendezvous::{checkin_key, lost_by};

use super::progress::{CheckinWatch, connected};
use super::rank::{POLL, Rank, reap, stop};
use super::spec::Job;
use crate::interrupt;
use crate::outcome::{JobOutcome, MissingRank};
use crate::verdict::{Seen, Verdict, verdict};

impl Job {
    /// Waits for every rank; on the first failure, an interrupt or the start timeout,
    /// stops the rest.
    pub(super) fn supervise(&self, ranks: &mut [Rank], store: &MemoryStore) -> Result<JobOutcome> {
        let started = Instant::now();
        let mut checkin = self.start_timeout.map(CheckinWatch::new);
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
    while !reap(ranks.iter_mut()) && Instant::now() < deadline {
        sleep(Duration::from_millis(5));
    }
}
