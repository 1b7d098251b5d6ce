//! The elastic protocol: how hvdrun and the workers of an elastic job agree, through the
//! job's store, on the rendezvous rounds of a job whose membership changes.
//!
//! A worker is a process hvdrun started on one slot of one host, named `host:slot` for
//! as long as it lives; its rank changes from round to round. hvdrun alone writes a
//! round: every member's [`Assignment`] under the round's keys, then the round's
//! formed key, then the round number at [`ROUND_KEY`]. Everything the members of a
//! round write (the transports' addresses, their reports of lost peers) lives under
//! [`round_prefix`], so no key of one round is mistaken for another's.
//!
//! A worker that leaves a round (its peers failed, or hvdrun announced new or removed
//! hosts) says so at [`waiting_key`] and waits for the next round; hvdrun forms it once
//! every worker it still counts on is waiting. A worker with no assignment in the round
//! it finds has been removed from the job and exits.

pub mod round;

use std::time::{Duration, Instant};

use hvd_core::wire::{Reader, Writer};
use hvd_core::{Error, Result, Store};

/// The newest round hvdrun has formed, a counter.
pub const ROUND_KEY: &str = "elastic.round";

/// How many changes of hosts hvdrun has announced, a counter. Workers whose round was
/// formed before the latest one leave it at their next commit.
pub const UPDATES_KEY: &str = "elastic.updates";

/// The variable that names the worker (`host:slot`) in its environment.
pub const WORKER_VAR: &str = "HVD_ELASTIC_WORKER";

/// The variable with the newest round formed when hvdrun started the worker: it joins a
/// later one.
pub const AFTER_VAR: &str = "HVD_ELASTIC_AFTER";

/// Where every key a round's members write lives.
pub fn round_prefix(round: u64) -> String {
    format!("elastic/{round}/job/")
}

fn formed_key(round: u64) -> String {
    format!("elastic/{round}/formed")
}

/// Where hvdrun writes `worker`'s assignment in `round`.
pub fn assignment_key(round: u64, worker: &str) -> String {
    format!("elastic/{round}/assign/{worker}")
}

/// Where `worker` says it left `round` and waits for the next one, and why.
pub fn waiting_key(round: u64, worker: &str) -> String {
    format!("elastic/{round}/waiting/{worker}")
}

/// Where `worker` reports an error that no new round can cure (a bug, a mismatch): the
/// job ends with it.
pub fn fatal_key(worker: &str) -> String {
    format!("elastic.fatal.{worker}")
}

/// Why a worker left its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaving {
    /// A peer was lost or went silent; the worker rolled back to its last commit.
    Failed,
    /// hvdrun announced new or removed hosts; the worker left at a commit.
    Updated,
}

impl Leaving {
    pub fn as_str(self) -> &'static str {
        match self {
            Leaving::Failed => "failed",
            Leaving::Updated => "updated",
        }
    }

    pub fn parse(bytes: &[u8]) -> Option<Leaving> {
        match bytes {
            b"failed" => Some(Leaving::Failed),
            b"updated" => Some(Leaving::Updated),
            _ => None,
        }
    }
}

/// A worker's place in one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub rank: usize,
    pub size: usize,
    pub local_rank: usize,
    pub local_size: usize,
    pub cross_rank: usize,
    pub cross_size: usize,
    /// The value of [`UPDATES_KEY`] when the round was formed.
    pub updates: u64,
}

impl Assignment {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::new();
        out.usize(self.rank)
            .usize(self.size)
            .usize(self.local_rank)
            .usize(self.local_size)
            .usize(self.cross_rank)
            .usize(self.cross_size)
            .u64(self.updates);
        out.into_bytes()
    }

    /// Reads an assignment; garbage is a protocol error naming the field.
    pub fn decode(bytes: &[u8]) -> Result<Assignment> {
        // The reader names the message itself.
        let mut r = Reader::reporting(bytes, "elastic assignment", Error::Store);
        let a = Assignment {
            rank: r.usize("rank")?,
            size: r.usize("size")?,
            local_rank: r.usize("local rank")?,
            local_size: r.usize("local size")?,
            cross_rank: r.usize("cross rank")?,
            cross_size: r.usize("cross size")?,
            updates: r.u64("updates")?,
        };
        r.end()?;
        let consistent = a.rank < a.size
            && a.local_rank < a.local_size
            && a.local_size <= a.size
            && a.cross_rank < a.cross_size
            && a.cross_size <= a.size;
        if !consistent {
            return Err(Error::Store(format!(
                "elastic assignment: an inconsistent one: {a:?}"
            )));
        }
        Ok(a)
    }
}

/// What a worker finds when it looks for its next round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextRound {
    Joined {
        round: u64,
        assignment: Assignment,
    },
    /// The newest round does not include the worker: it has been removed from the job.
    Removed {
        round: u64,
    },
}

/// Publishes round `round`: every `(worker, assignment)`, then the round itself.
pub fn publish_round(
    store: &dyn Store,
    round: u64,
    members: &[(String, Assignment)],
) -> Result<()> {
    for (worker, assignment) in members {
        store.set(&assignment_key(round, worker), &assignment.encode())?;
    }
    store.set(&formed_key(round), b"1")?;
    store.set(ROUND_KEY, round.to_string().as_bytes())
}

/// The newest round formed, 0 before the first.
pub fn current_round(store: &dyn Store) -> Result<u64> {
    counter(store, ROUND_KEY)
}

/// The number of host changes announced so far.
pub fn updates(store: &dyn Store) -> Result<u64> {
    counter(store, UPDATES_KEY)
}

fn counter(store: &dyn Store, key: &str) -> Result<u64> {
    match store.try_get(key)? {
        None => Ok(0),
        Some(bytes) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| Error::Store(format!("key '{key}' holds no round number"))),
    }
}

/// Waits, up to `timeout`, for a round newer than `after` and reads `worker`'s place
/// in the newest one.
pub fn next_round(
    store: &dyn Store,
    worker: &str,
    after: u64,
    timeout: Duration,
) -> Result<NextRound> {
    let deadline = Instant::now() + timeout;
    loop {
        let round = current_round(store)?;
        if round > after {
            return Ok(match store.try_get(&assignment_key(round, worker))? {
                Some(bytes) => NextRound::Joined {
                    round,
                    assignment: Assignment::decode(&bytes)?,
                },
                None => NextRound::Removed { round },
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Store(format!(
                "worker {worker}: no new rendezvous round after round {after} within {timeout:?} (is hvdrun still running, and are enough hosts available?)"
            )));
        }
        // Wakes as soon as hvdrun forms the next round.
        // A store that broke is that, not a round still to come.
        match store.get(&formed_key(after + 1), left) {
            Ok(_) => {}
            Err(e) if hvd_core::store::timed_out(&e) => {}
            Err(other) => return Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use hvd_core::MemoryStore;

    use super::*;

    fn assignment(rank: usize, size: usize) -> Assignment {
        Assignment {
            rank,
            size,
            local_rank: rank % 2,
            local_size: 2,
            cross_rank: rank / 2,
            cross_size: size / 2,
            updates: 3,
        }
    }

    #[test]
    fn assignments_round_trip_and_nonsense_is_refused() {
        let a = assignment(3, 4);
        assert_eq!(Assignment::decode(&a.encode()).unwrap(), a);
        let mut bad = a.clone();
        bad.rank = 4;
        assert!(
            Assignment::decode(&bad.encode())
                .unwrap_err()
                .to_string()
                .starts_with("store: elastic assignment: an inconsistent one")
        );
        assert_eq!(
            Assignment::decode(b"\x01").unwrap_err().to_string(),
            "store: elastic assignment: truncated: expected 8 bytes for the rank, 1 left"
        );
    }

    #[test]
    fn a_worker_finds_its_place_in_the_next_round_or_learns_it_was_removed() {
        let store = MemoryStore::new();
        let members = vec![
            ("a:0".to_string(), assignment(0, 2)),
            ("a:1".into(), assignment(1, 2)),
        ];
        let waiter = std::thread::scope(|s| {
            let waiter = s.spawn(|| next_round(&store, "a:1", 0, Duration::from_secs(10)));
            std::thread::sleep(Duration::from_millis(50));
            publish_round(&store, 1, &members).unwrap();
            waiter.join().unwrap()
        });
        assert_eq!(
            waiter.unwrap(),
            NextRound::Joined {
                round: 1,
                assignment: assignment(1, 2)
            }
        );
        publish_round(&store, 2, &members[..1]).unwrap();
        assert_eq!(
            next_round(&store, "a:1", 1, Duration::from_secs(1)).unwrap(),
            NextRound::Removed { round: 2 }
        );
    }

    #[test]
    fn a_worker_that_waits_in_vain_says_after_which_round() {
        let store = MemoryStore::new();
        let err = next_round(&store, "b:0", 4, Duration::from_millis(50)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "store: worker b:0: no new rendezvous round after round 4 within 50ms (is hvdrun still running, and are enough hosts available?)"
        );
    }
}
