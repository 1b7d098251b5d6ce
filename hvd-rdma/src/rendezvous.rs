//! Forming a group: every rank publishes its endpoint's address in the [`Store`] and
//! reads everyone else's, so each can fill an address vector in rank order.
//!
//! A record is `hvd-rdma1\n<provider>\n<host>\n<process>\n<address bytes>`: ranks that
//! opened different providers cannot talk, and are told so instead of timing out; the
//! process (pid and pid namespace) lets a rank that times out see whether a peer on its
//! host has died.

use std::time::{Duration, Instant};

use hvd_core::{Error, Result, Store};

const MAGIC: &str = "hvd-rdma1";

/// What one rank published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub provider: String,
    pub host: String,
    pub process: Process,
    pub address: Vec<u8>,
}

/// A process, as the kernel of its host knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Process {
    pub pid: u32,
    /// The pid namespace (`/proc/self/ns/pid`): pids mean something only within one.
    pub namespace: String,
}

impl Process {
    pub(crate) fn current() -> Process {
        let namespace = std::fs::read_link("/proc/self/ns/pid")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        Process {
            pid: std::process::id(),
            namespace,
        }
    }

    /// A process on another host, which this one cannot check on.
    pub(crate) fn elsewhere() -> Process {
        Process {
            pid: 0,
            namespace: String::new(),
        }
    }

    /// Whether this process has exited, as far as `me` can tell: only for another
    /// process of the same pid namespace, never for `me` itself.
    pub(crate) fn has_exited(&self, me: &Process) -> bool {
        if self.namespace.is_empty() || self.namespace != me.namespace || self.pid == me.pid {
            return false;
        }
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists; nothing is delivered.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        !alive && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }

    fn encode(&self) -> String {
        format!("{} {}", self.pid, self.namespace)
    }

    fn decode(text: &str) -> Option<Process> {
        let (pid, namespace) = text.split_once(' ')?;
        Some(Process {
            pid: pid.parse().ok()?,
            namespace: namespace.to_owned(),
        })
    }
}

impl Record {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut bytes = format!(
            "{MAGIC}\n{}\n{}\n{}\n",
            self.provider,
            self.host,
            self.process.encode()
        )
        .into_bytes();
        bytes.extend_from_slice(&self.address);
        bytes
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Record> {
        let mut parts = bytes.splitn(5, |b| *b == b'\n');
        let magic = parts.next()?;
        let provider = std::str::from_utf8(parts.next()?).ok()?;
        let host = std::str::from_utf8(parts.next()?).ok()?;
        let process = Process::decode(std::str::from_utf8(parts.next()?).ok()?)?;
        let address = parts.next()?;
        (magic == MAGIC.as_bytes()).then(|| Record {
            provider: provider.to_owned(),
            host: host.to_owned(),
            process,
            address: address.to_vec(),
        })
    }
}

/// The longest address accepted from a peer's record.
const MAX_ADDRESS: usize = 4096;

pub(crate) fn key(prefix: &str, rank: usize) -> String {
    format!("{prefix}/addr/{rank}")
}

fn ready_key(prefix: &str, rank: usize) -> String {
    format!("{prefix}/ready/{rank}")
}

/// Says this rank has every address in its address vector, and waits until every rank
/// says so: a provider may drop a message from a sender it cannot look up yet.
pub(crate) fn ready(
    store: &dyn Store,
    prefix: &str,
    rank: usize,
    size: usize,
    timeout: Duration,
) -> Result<()> {
    store.set(&ready_key(prefix, rank), b"1")?;
    let deadline = Instant::now() + timeout;
    for peer in 0..size {
        let left = deadline.saturating_duration_since(Instant::now());
        match store.get(&ready_key(prefix, peer), left) {
            Ok(_) => {}
            Err(e) if hvd_core::store::timed_out(&e) => {
                let absent = absent(store, size, |r| ready_key(prefix, r));
                return Err(start_timeout(
                    rank,
                    timeout,
                    format!("rank {absent} to open its endpoint"),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Publishes `mine` and returns every rank's record, in rank order; fails after `timeout`
/// naming the ranks that never published.
pub(crate) fn exchange(
    store: &dyn Store,
    prefix: &str,
    rank: usize,
    size: usize,
    mine: &Record,
    timeout: Duration,
) -> Result<Vec<Record>> {
    store.set(&key(prefix, rank), &mine.encode())?;
    let deadline = Instant::now() + timeout;
    let mut records = Vec::with_capacity(size);
    for peer in 0..size {
        let left = deadline.saturating_duration_since(Instant::now());
        let bytes = match store.get(&key(prefix, peer), left) {
            Ok(bytes) => bytes,
            Err(e) if hvd_core::store::timed_out(&e) => {
                return Err(missing(store, prefix, rank, size, timeout));
            }
            Err(e) => return Err(e),
        };
        let record = Record::decode(&bytes).ok_or_else(|| Error::Protocol {
            rank,
            peer: format!("rank {peer}"),
            reason: format!(
                "its address record under '{}' is not an hvd-rdma record",
                key(prefix, peer)
            ),
        })?;
        if record.provider != mine.provider {
            return Err(Error::Mismatch {
                property: "libfabric providers",
                tensor: "rdma endpoint".into(),
                rank_a: rank,
                value_a: mine.provider.clone(),
                rank_b: peer,
                value_b: record.provider,
            });
        }
        // Addresses differ in length within a provider (shm's are strings), so only what
        // no provider makes is refused here; Endpoint::insert pads the rest.
        if record.address.is_empty() || record.address.len() > MAX_ADDRESS {
            return Err(Error::Protocol {
                rank,
                peer: format!("rank {peer}"),
                reason: format!(
                    "its libfabric address under '{}' is {} bytes (a provider's are 1 to {MAX_ADDRESS})",
                    key(prefix, peer),
                    record.address.len(),
                ),
            });
        }
        records.push(record);
    }
    Ok(records)
}

fn missing(store: &dyn Store, prefix: &str, rank: usize, size: usize, waited: Duration) -> Error {
    let absent = absent(store, size, |r| key(prefix, r));
    start_timeout(
        rank,
        waited,
        format!("rank {absent} to publish its libfabric address under '{prefix}/addr/<rank>'"),
    )
}

/// The ranks whose key is not set, as `2, rank 5`.
fn absent(store: &dyn Store, size: usize, key: impl Fn(usize) -> String) -> String {
    let absent: Vec<String> = (0..size)
        .filter(|peer| !matches!(store.try_get(&key(*peer)), Ok(Some(_))))
        .map(|peer| peer.to_string())
        .collect();
    absent.join(", rank ")
}

fn start_timeout(rank: usize, waited: Duration, waiting_for: String) -> Error {
    Error::Timeout {
        rank,
        op: "connect",
        tensor: "rendezvous".into(),
        waited,
        waiting_for,
    }
}

/// Host ids for [`Topology::from_hosts`](hvd_core::Topology::from_hosts): ranks with the
/// same host name share one, numbered by first appearance.
pub(crate) fn host_ids(records: &[Record]) -> Vec<u32> {
    let mut names: Vec<&str> = Vec::new();
    records
        .iter()
        .map(|r| {
            let id = names.iter().position(|n| *n == r.host).unwrap_or_else(|| {
                names.push(&r.host);
                names.len() - 1
            });
            u32::try_from(id).unwrap_or(u32::MAX)
        })
        .collect()
}

/// This machine's host name.
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer holds `buf.len()` bytes; gethostname NUL-terminates within it
    // or reports an error.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hvd_core::MemoryStore;

    use super::*;

    fn record(provider: &str, host: &str) -> Record {
        Record {
            provider: provider.into(),
            host: host.into(),
            process: Process::current(),
            address: vec![0, 10, 13, 255],
        }
    }

    /// What rank 1 of `size` is told when rank 0 published `published` and the others
    /// nothing, this rank being on shm.
    fn exchange_error(published: &[u8], size: usize, timeout: Duration) -> String {
        let store = Arc::new(MemoryStore::new());
        store.set(&key("rdma", 0), published).unwrap();
        let mine = record("shm", "a");
        match exchange(store.as_ref(), "rdma", 1, size, &mine, timeout) {
            Ok(_) => panic!("the exchange succeeded"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn records_survive_the_store_with_binary_addresses() {
        let r = record("tcp;ofi_rxm", "node-1");
        assert_eq!(Record::decode(&r.encode()), Some(r));
        assert_eq!(Record::decode(b"garbage"), None);
    }

    #[test]
    fn a_rank_that_never_publishes_is_named() {
        assert_eq!(
            exchange_error(&record("shm", "a").encode(), 3, Duration::from_millis(50)),
            "rank 1: connect of tensor 'rendezvous' timed out after 50ms waiting for rank 2 to publish its libfabric address under 'rdma/addr/<rank>'"
        );
    }

    #[test]
    fn an_address_no_provider_makes_is_refused_before_libfabric_reads_it() {
        let empty = Record {
            address: Vec::new(),
            ..record("shm", "a")
        };
        assert_eq!(
            exchange_error(&empty.encode(), 2, Duration::from_secs(1)),
            "rank 1: protocol error from rank 0: its libfabric address under 'rdma/addr/0' is 0 bytes (a provider's are 1 to 4096)"
        );
    }

    #[test]
    fn ranks_on_different_providers_are_told_so() {
        assert_eq!(
            exchange_error(
                &record("tcp;ofi_rxm", "a").encode(),
                2,
                Duration::from_secs(1)
            ),
            "Mismatched libfabric providers for tensor 'rdma endpoint': rank 1 has shm, rank 0 has tcp;ofi_rxm"
        );
    }

    #[test]
    fn a_record_that_is_not_ours_is_a_protocol_error_naming_the_rank() {
        assert_eq!(
            exchange_error(b"not an address", 2, Duration::from_secs(1)),
            "rank 1: protocol error from rank 0: its address record under 'rdma/addr/0' is not an hvd-rdma record"
        );
    }

    #[test]
    fn a_rank_that_never_opens_its_endpoint_is_named() {
        let store = Arc::new(MemoryStore::new());
        let error = ready(store.as_ref(), "rdma", 0, 2, Duration::from_millis(50));
        let text = error.map_err(|e| e.to_string());
        assert_eq!(
            text,
            Err("rank 0: connect of tensor 'rendezvous' timed out after 50ms waiting for rank 1 to open its endpoint".into())
        );
    }

    #[test]
    fn only_other_processes_of_this_namespace_can_be_seen_dead() {
        let me = Process::current();
        assert!(!me.has_exited(&me));
        let gone = Process {
            pid: u32::MAX >> 2,
            namespace: me.namespace.clone(),
        };
        assert_eq!(gone.has_exited(&me), !me.namespace.is_empty());
        let elsewhere = Process {
            namespace: "pid:[1]".into(),
            ..gone
        };
        assert!(!elsewhere.has_exited(&me));
    }

    #[test]
    fn hosts_are_numbered_by_first_appearance() {
        let records = [record("shm", "b"), record("shm", "a"), record("shm", "b")];
        assert_eq!(host_ids(&records), [0, 1, 0]);
    }
}
