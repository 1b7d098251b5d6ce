//! Forming a group: rank 0 creates the segment and publishes its name in the store, the
//! others attach, and the name is unlinked as soon as every rank has the segment mapped,
//! so a crash after that leaves nothing behind in `/dev/shm`.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::store;
use hvd_core::{Error, Result, Store};

use crate::config::{MAX_SLOT_BYTES, MIN_SLOT_BYTES};
use crate::layout::Layout;
use crate::segment::{self, Refusal, Segment};

/// Names of segments start with this, so that leftovers are easy to recognise.
pub(crate) const NAME_PREFIX: &str = "hvd-shm-";

/// Numbers the groups this process creates, so that two never share a name.
static CREATED: AtomicU64 = AtomicU64::new(0);

/// What rank 0 publishes in the store for the others.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    name: String,
    token: u64,
    slot_bytes: usize,
}

impl Record {
    fn encode(&self) -> String {
        format!("{} {:x} {}", self.name, self.token, self.slot_bytes)
    }

    fn decode(bytes: &[u8]) -> Option<Record> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut words = text.split(' ');
        let record = Record {
            name: words.next()?.into(),
            token: u64::from_str_radix(words.next()?, 16).ok()?,
            slot_bytes: words.next()?.parse().ok()?,
        };
        let sane = record.name.starts_with(NAME_PREFIX)
            && !record.name.contains('/')
            && (MIN_SLOT_BYTES..=MAX_SLOT_BYTES).contains(&record.slot_bytes)
            && words.next().is_none();
        sane.then_some(record)
    }
}

/// One rank's way into a group.
pub(crate) struct Joiner<'a> {
    pub(crate) store: &'a dyn Store,
    /// Store namespace of the group.
    pub(crate) prefix: &'a str,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) job_id: &'a str,
    pub(crate) slot_bytes: usize,
    pub(crate) timeout: Duration,
}

impl Joiner<'_> {
    /// The mapped segment, once every rank has attached to it.
    pub(crate) fn join(&self) -> Result<Segment> {
        let started = Instant::now();
        let segment = if self.rank == 0 {
            self.create()?
        } else {
            self.attach(started)?
        };
        let me = segment.control(self.rank);
        if me
            .pid
            .compare_exchange(0, std::process::id(), Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(self.protocol(format!(
                "another process already attached as rank {} to segment '{}' (two ranks were given the same rank?)",
                self.rank,
                segment.name()
            )));
        }
        segment.header().attached.fetch_add(1, Ordering::AcqRel);
        let all = self.wait_for_everyone(&segment, started);
        // Whether everyone came or not, no rank may attach any more.
        segment::unlink(segment.name());
        if self.rank == 0 && all.is_ok() {
            // Only so that a later group in the same store never reads this record; if
            // the delete fails, its ranks retry until rank 0 replaces it.
            if let Err(e) = self.store.delete(&self.key()) {
                tracing::debug!("rank 0: removing the segment record: {e}");
            }
        }
        all.map(|()| segment)
    }

    fn key(&self) -> String {
        format!("{}/segment", self.prefix)
    }

    fn create(&self) -> Result<Segment> {
        let layout = Layout::new(self.size, self.slot_bytes);
        let token = RandomState::new().hash_one((
            std::process::id(),
            CREATED.fetch_add(1, Ordering::Relaxed),
            Instant::now(),
        ));
        let job = if self.job_id.is_empty() {
            String::new()
        } else {
            format!("{}-", self.job_id)
        };
        let name = format!("{NAME_PREFIX}{job}{token:016x}");
        let segment = Segment::create(&name, layout, token).map_err(|e| {
            Error::io(
                format!(
                    "rank 0: creating shared-memory segment '/dev/shm/{name}' of {} bytes",
                    layout.len()
                ),
                &e,
            )
        })?;
        let record = Record {
            name,
            token,
            slot_bytes: layout.slot_bytes(),
        };
        if let Err(e) = self.store.set(&self.key(), record.encode().as_bytes()) {
            segment::unlink(segment.name());
            return Err(e);
        }
        Ok(segment)
    }

    /// Attaches to the segment rank 0 published. A record or segment that does not fit
    /// may be a crashed group's leftover that rank 0 is about to replace, so the rank
    /// tries again until the start timeout, and then says why the last try failed.
    fn attach(&self, started: Instant) -> Result<Segment> {
        let key = self.key();
        loop {
            let left = self.timeout.saturating_sub(started.elapsed());
            let bytes = self.store.get(&key, left).map_err(|e| {
                if !store::timed_out(&e) {
                    return e;
                }
                self.timeout_error(
                    format!("rank 0 to create the shared-memory segment: it never published '{key}' in the store (not started, crashed, or given another store?)"),
                )
            })?;
            match self.attach_to(&key, &bytes) {
                Ok(segment) => return Ok(segment),
                Err(error) if started.elapsed() >= self.timeout => return Err(error),
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    fn attach_to(&self, key: &str, bytes: &[u8]) -> Result<Segment> {
        let record = Record::decode(bytes).ok_or_else(|| {
            self.protocol(format!(
                "'{key}' in the store holds {:?}, not a segment record",
                String::from_utf8_lossy(bytes)
            ))
        })?;
        let layout = Layout::new(self.size, record.slot_bytes);
        if layout.slot_bytes() != record.slot_bytes {
            return Err(self.protocol(format!(
                "segment '{}' has slots of {} bytes, which a group of {} cannot use (ranks given different sizes?)",
                record.name, record.slot_bytes, self.size
            )));
        }
        Segment::attach(&record.name, layout, record.token).map_err(|refusal| {
            let why = match refusal {
                Refusal::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    "it does not exist on this host (rank 0 runs on another host or gave up, or the store holds an earlier job's record)".into()
                }
                Refusal::Io(e) => e.to_string(),
                Refusal::Foreign(why) => format!("it is not this group's segment: {why}"),
            };
            self.protocol(format!(
                "cannot attach to shared-memory segment '/dev/shm/{}': {why}",
                record.name
            ))
        })
    }

    fn wait_for_everyone(&self, segment: &Segment, started: Instant) -> Result<()> {
        let mut pause = Duration::from_micros(50);
        loop {
            if segment.header().attached.load(Ordering::Acquire) as usize >= self.size {
                return Ok(());
            }
            if started.elapsed() >= self.timeout {
                let missing: Vec<String> = (0..self.size)
                    .filter(|r| segment.control(*r).pid.load(Ordering::Acquire) == 0)
                    .map(|r| r.to_string())
                    .collect();
                let ranks = if missing.len() == 1 { "rank" } else { "ranks" };
                return Err(self.timeout_error(
                    format!(
                        "{ranks} {} to attach to shared-memory segment '/dev/shm/{}' (not started, crashed, or given another store?)",
                        missing.join(", "),
                        segment.name()
                    ),
                ));
            }
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    fn timeout_error(&self, waiting_for: String) -> Error {
        Error::Timeout {
            rank: self.rank,
            op: "connect",
            tensor: "rendezvous".into(),
            waited: self.timeout,
            waiting_for,
        }
    }

    fn protocol(&self, reason: String) -> Error {
        Error::Protocol {
            rank: self.rank,
            peer: "rank 0".into(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let record = Record {
            name: format!("{NAME_PREFIX}job-0123"),
            token: 0xabc,
            slot_bytes: 4096,
        };
        assert_eq!(Record::decode(record.encode().as_bytes()), Some(record));
        assert_eq!(Record::decode(b"hvd-shm-x zz 4096"), None);
        assert_eq!(Record::decode(b"../etc/passwd 1 4096"), None);
        assert_eq!(Record::decode(b"hvd-shm-x 1 4096 more"), None);
        assert_eq!(Record::decode(b"hvd-shm-x 1 18446744073709551615"), None);
        assert_eq!(Record::decode(&[0xff, 0xfe]), None);
    }

    /// A store whose server is gone: every call fails at once.
    struct Gone;

    impl Store for Gone {
        fn set(&self, _: &str, _: &[u8]) -> Result<()> {
            Err(Gone::error())
        }
        fn get(&self, _: &str, _: Duration) -> Result<Vec<u8>> {
            Err(Gone::error())
        }
        fn try_get(&self, _: &str) -> Result<Option<Vec<u8>>> {
            Err(Gone::error())
        }
        fn add(&self, _: &str, _: i64) -> Result<i64> {
            Err(Gone::error())
        }
        fn delete(&self, _: &str) -> Result<bool> {
            Err(Gone::error())
        }
    }

    impl Gone {
        fn error() -> Error {
            Error::Store("the server closed the connection (has the launcher exited?)".into())
        }
    }

    #[test]
    fn a_store_that_fails_is_reported_as_such_not_as_a_wait_for_rank_0() {
        let joiner = Joiner {
            store: &Gone,
            prefix: "g",
            rank: 1,
            size: 2,
            job_id: "job",
            slot_bytes: MIN_SLOT_BYTES,
            timeout: Duration::from_secs(30),
        };
        let started = Instant::now();
        let error = joiner.join().err().unwrap().to_string();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(error, Gone::error().to_string());
    }

    #[test]
    fn a_store_that_times_out_is_a_wait_for_rank_0() {
        let store = hvd_core::MemoryStore::new();
        let joiner = Joiner {
            store: &store,
            prefix: "g",
            rank: 1,
            size: 2,
            job_id: "job",
            slot_bytes: MIN_SLOT_BYTES,
            timeout: Duration::from_millis(50),
        };
        let error = joiner.join().err().unwrap().to_string();
        assert!(
            error.contains("rank 0 to create the shared-memory segment: it never published"),
            "{error}"
        );
    }
}
