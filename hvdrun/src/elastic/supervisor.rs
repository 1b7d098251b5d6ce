//! The elastic job's loop: workers started and reaped, rounds formed, failures judged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use hvd_core::units::MAX_DURATION;
use hvd_core::{MemoryStore, PrefixStore, Result, Store};
use hvd_rendezvous::elastic::round::{Candidate, assign, order};
use hvd_rendezvous::elastic::{
    AFTER_VAR, Leaving, UPDATES_KEY, WORKER_VAR, fatal_key, publish_round, round_prefix,
    waiting_key,
};
use hvd_rendezvous::lost_by;

use super::Elastic;
use super::blacklist::Blacklist;
use crate::hosts::Host;
use crate::interrupt;
use crate::job::{Job, Launch, Rank, kill, stop};
use crate::outcome::JobOutcome;
use crate::verdict::{Seen, Verdict, verdict};

const POLL: Duration = Duration::from_millis(10);

/// How long after a round's first failure hvdrun waits for the others' reports before
/// it judges: peers of a dead rank fail within milliseconds.
const SETTLE: Duration = Duration::from_millis(300);

/// How much longer hvdrun waits for the rank it would blame when that rank is alive,
/// silent, and on a host another member reported from. When detection is by timeout
/// (a cut link, a frozen rank), the ranks that waited on a waiting rank time out about
/// when it does, and on a loaded machine may report first; it then names the rank it
/// waited for. A rank on a host nobody reaches never reports, so it costs no wait.
const REACHABLE_PATIENCE: Duration = Duration::from_secs(3);

/// How long a round waits after the last change (a worker started, a host found) so
/// that changes close together make one round.
const JOIN_WINDOW: Duration = Duration::from_millis(200);

/// How much longer than the elastic timeout a worker waits for a round: hvdrun, which
/// knows why no round comes, ends the job first.
const WORKER_PATIENCE: Duration = Duration::from_secs(30);

/// One process started on one slot of one host.
struct Worker {
    /// `host:slot`, for messages and output.
    slot: String,
    /// `host:slot.N`, N counting the slot's workers: its key in the store, so a worker
    /// of an earlier incarnation that comes back (its link restored) finds no place.
    key: String,
    host: String,
    process: Rank,
}

impl Worker {
    fn alive(&self) -> bool {
        self.process.status.is_none()
    }

    fn exited_ok(&self) -> bool {
        self.process.status.is_some_and(|s| s.success())
    }

    fn failed(&self) -> bool {
        self.process.status.is_some_and(|s| !s.success())
    }
}

enum Phase {
    /// Waiting to form the next round.
    Forming,
    Running,
    /// A member failed at `since`; waiting for the other reports.
    Failing {
        since: Instant,
    },
}

struct Supervisor<'a> {
    job: &'a Job,
    elastic: &'a Elastic,
    launch: Launch<'a>,
    store: Arc<MemoryStore>,
    workers: Vec<Worker>,
    blacklist: Blacklist,
    /// The hosts discovered last.
    hosts: Vec<Host>,
    discovered_at: Instant,
    readmitted_at: Instant,
    round: u64,
    /// The workers of the current round, in rank order.
    members: Vec<usize>,
    phase: Phase,
    resets: usize,
    below_min_since: Option<Instant>,
    changed_at: Instant,
}

/// Runs `job` elastically.
pub(crate) fn run(job: &Job, elastic: &Elastic) -> Result<JobOutcome> {
    if job.handle_interrupts {
        interrupt::install()?;
    }
    let hosts = elastic.source.discover()?;
    let (secret, server) = job.serve(&server_hosts(elastic, &hosts))?;
    let launch = job.launch(&server, &secret, true)?;
    let now = Instant::now();
    let mut supervisor = Supervisor {
        job,
        elastic,
        launch,
        store: server.store(),
        workers: Vec::new(),
        blacklist: Blacklist::new(elastic.cooldown.0, elastic.cooldown.1),
        hosts: Vec::new(),
        discovered_at: now,
        readmitted_at: now,
        round: 0,
        members: Vec::new(),
        phase: Phase::Forming,
        resets: 0,
        below_min_since: None,
        changed_at: now,
    };
    let outcome = supervisor
        .add_hosts(&hosts)
        .and_then(|()| supervisor.supervise());
    stop(
        supervisor.workers.iter_mut().map(|w| &mut w.process),
        job.grace,
    );
    outcome
}

/// The hosts the rendezvous server must be reachable from: those found now, and for a
/// discovery script, hosts it may add later (so never loopback alone).
fn server_hosts(elastic: &Elastic, found: &[Host]) -> Vec<Host> {
    let mut hosts = found.to_vec();
    if matches!(elastic.source, super::HostSource::Script { .. }) {
        hosts.push(Host {
            name: "a host discovered later".into(),
            slots: 1,
        });
    }
    hosts
}

impl Supervisor<'_> {
    fn say(&self, message: &str) {
        if let Some(name) = &self.job.progress {
            eprintln!("{name}: {message}");
        }
    }

    fn supervise(&mut self) -> Result<JobOutcome> {
        loop {
            if self.job.handle_interrupts && interrupt::interrupted() {
                let stopped = self.workers.iter().filter(|w| w.alive()).count();
                self.say(&format!("interrupted; stopping {stopped} workers"));
                return Ok(JobOutcome::Interrupted { stopped });
            }
            self.reap();
            if let Some(outcome) = self.fatal() {
                return Ok(outcome);
            }
            self.rediscover()?;
            match self.phase {
                Phase::Running => {
                    if !self.members.is_empty()
                        && self.members.iter().all(|m| self.workers[*m].exited_ok())
                    {
                        return Ok(JobOutcome::Success);
                    }
                    if self.round_failed() {
                        self.phase = Phase::Failing {
                            since: Instant::now(),
                        };
                    } else if self.members.iter().all(|m| self.left(*m)) {
                        self.phase = Phase::Forming;
                        self.changed_at = Instant::now();
                    }
                }
                Phase::Failing { since } => {
                    let all_reported = self.members.iter().all(|m| self.left(*m));
                    let settled = since.elapsed() >= SETTLE && !self.accused_may_yet_report(since);
                    if all_reported || settled {
                        self.blame();
                        self.phase = Phase::Forming;
                        self.changed_at = Instant::now();
                    }
                }
                Phase::Forming => {
                    if let Some(outcome) = self.form()? {
                        return Ok(outcome);
                    }
                }
            }
            sleep(POLL);
        }
    }

    /// Notes the workers that exited. One that failed outside the current round (a
    /// newcomer that could not join) charges its host, as a member's failure would.
    fn reap(&mut self) {
        let now = Instant::now();
        let mut failed = Vec::new();
        for (index, worker) in self.workers.iter_mut().enumerate() {
            if !worker.alive() {
                continue;
            }
            let Ok(Some(status)) = worker.process.child.try_wait() else {
                continue;
            };
            worker.process.status = Some(status);
            let charged = self.blacklist.blocks(&worker.host, now);
            if !status.success() && !self.members.contains(&index) && !charged {
                failed.push(index);
            }
        }
        for index in failed {
            let worker = &self.workers[index];
            let host = worker.host.clone();
            let status = worker.process.ended().map(|(s, _)| s).unwrap_or_default();
            let cooldown = self.blacklist.charge(&host, now);
            self.say(&format!(
                "worker {} on host {host} failed before joining a round ({status}); host {host} is kept out for {}s",
                worker.slot,
                cooldown.as_secs_f64()
            ));
            let on_host = self
                .workers
                .iter_mut()
                .filter(|w| w.host == host && w.alive());
            kill(on_host.map(|w| &mut w.process));
        }
    }

    /// How a worker said it left the current round, if it did.
    fn leaving(&self, worker: usize) -> Option<Leaving> {
        let key = waiting_key(self.round, &self.workers[worker].key);
        let posted = self.store.try_get(&key).ok()??;
        Leaving::parse(&posted)
    }

    /// Whether a member is done with the current round: left it, or exited.
    fn left(&self, worker: usize) -> bool {
        !self.workers[worker].alive() || self.leaving(worker).is_some()
    }

    fn round_store(&self) -> PrefixStore<Arc<MemoryStore>> {
        PrefixStore::new(self.store.clone(), round_prefix(self.round))
    }

    fn round_failed(&self) -> bool {
        let round = self.round_store();
        self.members.iter().enumerate().any(|(rank, m)| {
            self.workers[*m].failed()
                || self.leaving(*m) == Some(Leaving::Failed)
                || lost_by(&round, rank).is_some()
        })
    }

    /// The outcome of a worker that reported an error no round cures.
    fn fatal(&mut self) -> Option<JobOutcome> {
        let (index, message) = self.workers.iter().enumerate().find_map(|(i, w)| {
            let bytes = self.store.try_get(&fatal_key(&w.key)).ok()??;
            Some((i, String::from_utf8_lossy(&bytes).into_owned()))
        })?;
        let worker = &self.workers[index];
        let rank = self.members.iter().position(|m| *m == index);
        self.say(&format!(
            "worker {}{} failed with an error no new round can cure, which ends the job: {message}",
            worker.slot,
            rank.map_or_else(String::new, |r| format!(
                " (rank {r} of round {})",
                self.round
            )),
        ));
        let (status, exit_code) = worker
            .process
            .ended()
            .unwrap_or_else(|| ("still running after reporting the error".into(), 1));
        let stopped = self.workers.iter().filter(|w| w.alive()).count();
        Some(JobOutcome::Failed {
            rank: rank.unwrap_or(index),
            host: Some(worker.host.clone()),
            status,
            exit_code,
            stderr_tail: worker.process.tail(),
            lost_by: Vec::new(),
            stopped,
        })
    }

    /// What hvdrun knows of each member of the failed round, in rank order.
    fn seen(&self) -> Vec<Seen> {
        let round = self.round_store();
        self.members
            .iter()
            .enumerate()
            .map(|(rank, m)| Seen {
                failed: self.workers[*m].failed() || self.leaving(*m) == Some(Leaving::Failed),
                killed_by_signal: self.workers[*m].process.killed_by_signal(),
                lost: lost_by(&round, rank),
            })
            .collect()
    }

    /// Whether the rank the others name is alive, has not reported, and could still:
    /// another member on its host reported, so its host reaches hvdrun.
    fn accused_may_yet_report(&self, since: Instant) -> bool {
        if since.elapsed() >= SETTLE + REACHABLE_PATIENCE {
            return false;
        }
        let seen = self.seen();
        let first = seen.iter().position(|s| s.failed).unwrap_or(0);
        let accused = self.members[verdict(&seen, first).root];
        let host = &self.workers[accused].host;
        !self.left(accused)
            && self.members.iter().any(|m| {
                *m != accused && self.workers[*m].host == *host && self.leaving(*m).is_some()
            })
    }

    /// Judges the failed round: the root cause's host alone is charged and its workers
    /// stopped.
    fn blame(&mut self) {
        let seen = self.seen();
        let first = seen.iter().position(|s| s.failed).unwrap_or(0);
        let Verdict { mut root, lost_by } = verdict(&seen, first);
        // Nobody named anyone: a member that neither failed nor left is the one the
        // others waited for.
        let named = seen.iter().any(|s| s.lost.is_some() || s.killed_by_signal);
        if !named && let Some(silent) = (0..seen.len()).find(|r| !self.left(self.members[*r])) {
            root = silent;
        }
        let worker = &self.workers[self.members[root]];
        let host = worker.host.clone();
        let status = worker.process.ended().map_or_else(
            || "still running: frozen, stuck or cut off from its peers".to_string(),
            |(status, _)| status,
        );
        let cooldown = self.blacklist.charge(&host, Instant::now());
        let witnesses = match lost_by.as_slice() {
            [] => String::new(),
            ranks => format!(
                "; rank(s) {} lost it",
                ranks
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.say(&format!(
            "round {} failed: rank {root} (worker {}) on host {host} failed first ({status}){witnesses}; host {host} is kept out for {}s",
            self.round,
            worker.slot,
            cooldown.as_secs_f64()
        ));
        let on_host = self
            .workers
            .iter_mut()
            .filter(|w| w.host == host && w.alive());
        kill(on_host.map(|w| &mut w.process));
    }

    /// The workers the next round may include: alive, on a host still listed and not
    /// kept out, and done with the current round if they were in it.
    fn candidates(&self) -> Vec<usize> {
        let now = Instant::now();
        (0..self.workers.len())
            .filter(|i| {
                let w = &self.workers[*i];
                w.alive()
                    && self.hosts.iter().any(|h| h.name == w.host)
                    && !self.blacklist.blocks(&w.host, now)
            })
            .collect()
    }

    /// Forms the next round once every survivor has left the current one and enough
    /// workers are there; the outcome when the job cannot go on.
    fn form(&mut self) -> Result<Option<JobOutcome>> {
        let candidates = self.candidates();
        let survivors: Vec<usize> = self
            .members
            .iter()
            .copied()
            .filter(|m| candidates.contains(m))
            .collect();
        if survivors.iter().any(|m| self.leaving(*m).is_none()) {
            return Ok(None);
        }
        let count = candidates.len().min(self.elastic.max_np);
        if count < self.elastic.min_np {
            let since = *self.below_min_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.elastic.timeout {
                return Ok(Some(self.too_few_slots(count)));
            }
            return Ok(None);
        }
        self.below_min_since = None;
        if self.changed_at.elapsed() < JOIN_WINDOW {
            return Ok(None);
        }
        if self.round > 0 {
            self.resets += 1;
            if let Some(limit) = self.elastic.reset_limit.filter(|l| self.resets > *l) {
                return Ok(Some(JobOutcome::Elastic {
                    reason: format!(
                        "the job would need a new round (reset {}) after round {}, more than --reset-limit {limit} allows",
                        self.resets, self.round
                    ),
                }));
            }
        }
        let candidate = |i: &usize| Candidate {
            id: self.workers[*i].key.clone(),
            host: self.workers[*i].host.clone(),
        };
        let newcomers: Vec<Candidate> = candidates
            .iter()
            .filter(|i| !survivors.contains(i))
            .map(candidate)
            .collect();
        let survivors: Vec<Candidate> = survivors.iter().map(candidate).collect();
        let members = order(&survivors, &newcomers, self.elastic.max_np);
        let updates = self.updates()?;
        let places = assign(&members, updates);
        publish_round(self.store.as_ref(), self.round + 1, &places)?;
        self.round += 1;
        self.members = members
            .iter()
            .filter_map(|m| self.workers.iter().position(|w| w.key == m.id))
            .collect();
        let hosts: Vec<&str> = {
            let mut hosts: Vec<&str> = members.iter().map(|m| m.host.as_str()).collect();
            hosts.dedup();
            hosts
        };
        self.say(&format!(
            "round {}: {} ranks on {} host(s): {}",
            self.round,
            members.len(),
            hosts.len(),
            hosts.join(", ")
        ));
        self.phase = Phase::Running;
        Ok(None)
    }

    fn updates(&self) -> Result<u64> {
        hvd_rendezvous::elastic::updates(self.store.as_ref())
    }

    /// Tells the workers of the current round to leave it at their next commit.
    fn announce_update(&mut self) -> Result<()> {
        self.store.add(UPDATES_KEY, 1)?;
        self.changed_at = Instant::now();
        Ok(())
    }

    fn too_few_slots(&self, count: usize) -> JobOutcome {
        let now = Instant::now();
        let mut states: BTreeMap<String, String> = BTreeMap::new();
        for host in &self.hosts {
            let alive = self
                .workers
                .iter()
                .filter(|w| w.host == host.name && w.alive())
                .count();
            let state = self
                .blacklist
                .describe(&host.name, now)
                .unwrap_or_else(|| format!("{} slot(s), {alive} worker(s) running", host.slots));
            states.insert(host.name.clone(), state);
        }
        for worker in &self.workers {
            states
                .entry(worker.host.clone())
                .or_insert_with(|| "no longer listed by discovery".into());
        }
        let states: Vec<String> = states
            .into_iter()
            .map(|(host, state)| format!("\n  {host}: {state}"))
            .collect();
        JobOutcome::Elastic {
            reason: format!(
                "only {count} slot(s) were available for {}s, fewer than --min-np {}; hosts:{}",
                self.elastic.timeout.as_secs_f64(),
                self.elastic.min_np,
                states.concat()
            ),
        }
    }

    /// Asks for the hosts again when it is time, and acts on what changed: workers
    /// started on new hosts and on hosts whose cooldown ended, the workers of the
    /// current round told to leave it.
    fn rediscover(&mut self) -> Result<()> {
        let now = Instant::now();
        let readmitted = self.blacklist.readmitted(self.readmitted_at, now);
        self.readmitted_at = now;
        if !readmitted.is_empty() {
            let hosts: Vec<Host> = self
                .hosts
                .iter()
                .filter(|h| readmitted.contains(&h.name))
                .cloned()
                .collect();
            if !hosts.is_empty() {
                self.say(&format!(
                    "host(s) {} back after their cooldown",
                    readmitted.join(", ")
                ));
                self.add_hosts(&hosts)?;
            }
        }
        if self.discovered_at.elapsed() < self.elastic.discovery_interval {
            return Ok(());
        }
        self.discovered_at = now;
        let found = match self.elastic.source.discover() {
            Ok(found) => found,
            Err(e) => {
                self.say(&format!(
                    "host discovery failed, keeping the hosts known: {e}"
                ));
                return Ok(());
            }
        };
        let removed: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| !found.iter().any(|f| f.name == h.name))
            .map(|h| h.name.clone())
            .collect();
        let added: Vec<Host> = found
            .iter()
            .filter(|f| !self.hosts.iter().any(|h| h.name == f.name))
            .cloned()
            .collect();
        if !removed.is_empty() {
            self.say(&format!(
                "host(s) {} removed by discovery",
                removed.join(", ")
            ));
            self.hosts.retain(|h| !removed.contains(&h.name));
            if self
                .members
                .iter()
                .any(|m| removed.contains(&self.workers[*m].host))
            {
                self.announce_update()?;
            }
        }
        if !added.is_empty() {
            self.say(&format!(
                "host(s) {} added by discovery",
                added
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            self.add_hosts(&added)?;
        }
        Ok(())
    }

    /// Starts a worker on each free slot of `hosts` (up to the most a round may have),
    /// and tells the current round's workers, if any, to make room at their next commit.
    fn add_hosts(&mut self, hosts: &[Host]) -> Result<()> {
        let now = Instant::now();
        let mut started = false;
        for host in hosts {
            if !self.hosts.iter().any(|h| h.name == host.name) {
                self.hosts.push(host.clone());
            }
            if self.blacklist.blocks(&host.name, now) {
                continue;
            }
            for slot in 0..host.slots {
                let running = self.workers.iter().filter(|w| w.alive()).count();
                if running >= self.elastic.max_np {
                    break;
                }
                let name = format!("{}:{slot}", host.name);
                if self.workers.iter().any(|w| w.slot == name && w.alive()) {
                    continue;
                }
                self.start_worker(host, name)?;
                started = true;
            }
        }
        if started {
            self.changed_at = now;
            if matches!(self.phase, Phase::Running) {
                self.announce_update()?;
            }
        }
        Ok(())
    }

    fn start_worker(&mut self, host: &Host, slot: String) -> Result<()> {
        let incarnation = self.workers.iter().filter(|w| w.slot == slot).count();
        let key = format!("{slot}.{incarnation}");
        let env = vec![
            (WORKER_VAR.to_string(), key.clone()),
            (AFTER_VAR.into(), self.round.to_string()),
            // Longer than hvdrun's own wait, so that hvdrun decides and says why.
            (
                "HVD_ELASTIC_TIMEOUT".into(),
                (self.elastic.timeout.saturating_add(WORKER_PATIENCE))
                    .min(MAX_DURATION)
                    .as_secs_f64()
                    .to_string(),
            ),
            ("HVD_HOSTNAME".into(), host.name.clone()),
        ];
        let process = self.job.spawn(&slot, host, env, &self.launch)?;
        self.workers.push(Worker {
            slot,
            key,
            host: host.name.clone(),
            process,
        });
        Ok(())
    }
}
