//! The mesh of connections a group runs on: every rank listens, publishes its endpoint in
//! the rendezvous store, reads every other rank's, and connects to all of them (pairwise
//! exchanges and recursive doubling need any two ranks connected). Rank `i` dials every
//! rank below it and accepts every rank above it; each connection must pass the
//! handshake.
//!
//! Accepting runs in its own thread and each caller's handshake in another, so a stranger
//! that connects and says nothing, or sends garbage, holds up no one: it is dropped after
//! at most [`HANDSHAKE_TIMEOUT`] and logged at warn with its address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{Error, Result, Store, Topology};

use crate::config::TcpConfig;
use crate::handshake::{self, Deadlined, HANDSHAKE_TIMEOUT, Identity};
use crate::io::Link;
use crate::record::Record;
use hvd_core::net as addr;

use crate::socket;

/// How often the acceptor looks for new connections.
const ACCEPT_POLL: Duration = Duration::from_millis(1);
/// Handshakes with callers that are not (yet) known peers, allowed at once on top of one
/// per rank.
const MAX_STRAY_HANDSHAKES: usize = 64;
/// Longest pause between retries while waiting for the store or a listener.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// The connections of a formed group, and where its ranks run.
#[derive(Debug)]
pub(crate) struct Mesh {
    pub links: Vec<Link>,
    pub topology: Topology,
}

/// Who is forming which group.
pub(crate) struct Joiner<'a> {
    pub store: &'a dyn Store,
    /// Store namespace of the group.
    pub prefix: &'a str,
    pub rank: usize,
    pub size: usize,
    pub config: &'a TcpConfig,
}

impl Joiner<'_> {
    fn key(&self, rank: usize) -> String {
        format!("{}/addr/{rank}", self.prefix)
    }

    /// Job id and group, as the handshake checks them.
    fn group(&self) -> String {
        format!("{}/{}", self.config.job_id, self.prefix)
    }

    fn timeout(&self, waiting_for: String) -> Error {
        Error::Timeout {
            rank: self.rank,
            op: "connect",
            tensor: "rendezvous".into(),
            waited: self.config.start_timeout,
            waiting_for,
        }
    }

    /// Forms the group, or fails by `start_timeout` naming the ranks that never appeared.
    pub(crate) fn form(&self) -> Result<Mesh> {
        if self.size == 1 {
            return Ok(Mesh {
                links: Vec::new(),
                topology: Topology::single_host(0, 1),
            });
        }
        let deadline = Instant::now() + self.config.start_timeout;
        let interfaces = addr::interfaces()?;
        let plan = addr::listen_plan(&interfaces, self.config.interface.as_deref(), "HVD_IFACE")?;
        let listener = socket::listen(plan.bind).map_err(|e| {
            Error::io(
                format!("rank {}: listening on {}", self.rank, plan.bind),
                &e,
            )
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::io("reading the listening port", &e))?
            .port();
        let record = Record {
            host: addr::host_identity(&addr::hostname(), &interfaces),
            port,
            wildcard: plan.bind.is_unspecified(),
            addrs: plan.publish,
        };
        self.store.set(&self.key(self.rank), &record.encode())?;

        let (accepted_tx, accepted) = mpsc::channel();
        let stop = AtomicBool::new(false);
        thread::scope(|scope| {
            scope.spawn(|| self.accept(&listener, accepted_tx, &stop));
            let mesh = self.connect(deadline, &accepted);
            stop.store(true, Ordering::Relaxed);
            mesh
        })
    }

    fn connect(
        &self,
        deadline: Instant,
        accepted: &mpsc::Receiver<(usize, TcpStream, SocketAddr)>,
    ) -> Result<Mesh> {
        let records = self.gather(deadline)?;
        let single_host = records.iter().all(|r| r.host == records[0].host);
        let mut streams: Vec<Option<(TcpStream, SocketAddr)>> =
            (0..self.size).map(|_| None).collect();
        for (peer, record) in records.iter().enumerate().take(self.rank) {
            streams[peer] = Some(self.dial(peer, record, single_host, deadline)?);
        }
        self.collect(deadline, accepted, &mut streams)?;

        let mut links = Vec::with_capacity(self.size - 1);
        for (peer, slot) in streams.into_iter().enumerate() {
            let Some((stream, addr)) = slot else {
                continue;
            };
            stream.set_nonblocking(true).map_err(|e| {
                Error::io(
                    format!(
                        "rank {}: setting up the connection to rank {peer}",
                        self.rank
                    ),
                    &e,
                )
            })?;
            links.push(Link::new(peer, addr, mio::net::TcpStream::from_std(stream)));
        }
        let mut hosts: Vec<&str> = Vec::new();
        let host_of: Vec<u32> = records
            .iter()
            .map(|r| match hosts.iter().position(|h| *h == r.host) {
                Some(index) => index as u32,
                None => {
                    hosts.push(&r.host);
                    (hosts.len() - 1) as u32
                }
            })
            .collect();
        Ok(Mesh {
            links,
            topology: Topology::from_hosts(self.rank, host_of),
        })
    }

    /// Reads every rank's record, waiting for the ones not published yet.
    fn gather(&self, deadline: Instant) -> Result<Vec<Record>> {
        let mut records: Vec<Option<Record>> = vec![None; self.size];
        let mut pause = Duration::from_millis(1);
        loop {
            for (rank, slot) in records.iter_mut().enumerate().filter(|(_, s)| s.is_none()) {
                let key = self.key(rank);
                if let Some(bytes) = self.store.try_get(&key)? {
                    let record = Record::decode(&bytes).map_err(|why| {
                        Error::Store(format!(
                            "rank {rank} published a malformed endpoint under '{key}': {why}"
                        ))
                    })?;
                    *slot = Some(record);
                }
            }
            let missing: Vec<usize> = (0..self.size).filter(|r| records[*r].is_none()).collect();
            if missing.is_empty() {
                return Ok(records.into_iter().flatten().collect());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(self.timeout(format!(
                    "{} to appear: never published an endpoint under '{}' (not started, crashed, or given another store?)",
                    rank_list(&missing),
                    self.key(missing[0])
                )));
            }
            thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }

    /// Connects to `peer` and runs the dialer's handshake, retrying refused connections
    /// until `deadline`. A failed handshake is final: retrying cannot fix a wrong secret.
    fn dial(
        &self,
        peer: usize,
        record: &Record,
        single_host: bool,
        deadline: Instant,
    ) -> Result<(TcpStream, SocketAddr)> {
        let targets: Vec<SocketAddr> = if single_host && record.wildcard {
            vec![SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                record.port,
            )]
        } else {
            record
                .addrs
                .iter()
                .map(|ip| SocketAddr::new(*ip, record.port))
                .collect()
        };
        if targets.is_empty() {
            return Err(Error::Protocol {
                rank: self.rank,
                peer: format!("rank {peer}"),
                reason: format!(
                    "it runs on another host ({}) but published no address other hosts can reach (no usable non-loopback interface there; set HVD_IFACE)",
                    record.host
                ),
            });
        }
        let group = self.group();
        let me = Identity {
            group: &group,
            rank: self.rank,
            size: self.size,
            secret: &self.config.secret,
        };
        let mut pause = Duration::from_millis(1);
        loop {
            let mut last_error = String::new();
            for target in &targets {
                let left = deadline.saturating_duration_since(Instant::now());
                match socket::connect(
                    *target,
                    left.clamp(Duration::from_millis(1), HANDSHAKE_TIMEOUT),
                ) {
                    Ok(stream) => {
                        let describe = format!("rank {peer} ({target})");
                        handshake::dial(&mut Deadlined::new(&stream), &me, peer, &describe)?;
                        return Ok((stream, *target));
                    }
                    Err(e) => last_error = format!("{target}: {e}"),
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(self.timeout(format!(
                    "rank {peer} to accept a connection (last error: {last_error})"
                )));
            }
            thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }

    /// Waits until every higher rank has connected and passed the handshake.
    fn collect(
        &self,
        deadline: Instant,
        accepted: &mpsc::Receiver<(usize, TcpStream, SocketAddr)>,
        streams: &mut [Option<(TcpStream, SocketAddr)>],
    ) -> Result<()> {
        loop {
            let missing: Vec<usize> = (self.rank + 1..self.size)
                .filter(|r| streams[*r].is_none())
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match accepted.recv_timeout(left) {
                Ok((peer, stream, addr)) if streams[peer].is_none() => {
                    streams[peer] = Some((stream, addr))
                }
                Ok((peer, _, addr)) => tracing::warn!(
                    "rank {}: refused a second connection from rank {peer} at {addr}",
                    self.rank
                ),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    return Err(self.timeout(format!(
                        "{} to connect: they published endpoints but completed no handshake with this rank (another HVD_SECRET or HVD_JOB_ID, or a network that drops connections to {}?)",
                        rank_list(&missing),
                        self.rank
                    )));
                }
            }
        }
    }

    /// Accepts connections until `stop`, answering each caller in a thread of its own.
    fn accept(
        &self,
        listener: &TcpListener,
        accepted: mpsc::Sender<(usize, TcpStream, SocketAddr)>,
        stop: &AtomicBool,
    ) {
        let rank = self.rank;
        if let Err(e) = listener.set_nonblocking(true) {
            tracing::warn!("rank {rank}: cannot accept connections: {e}");
            return;
        }
        // Every real peer needs one handshake; strays beyond a margin are dropped, so a
        // flood of connections cannot pile up threads.
        let limit = self.size + MAX_STRAY_HANDSHAKES;
        let running = Arc::new(AtomicUsize::new(0));
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((_, addr)) if running.load(Ordering::SeqCst) >= limit => {
                    tracing::warn!(
                        "rank {rank}: refused a connection from {addr}: {limit} handshakes already under way"
                    );
                }
                Ok((stream, addr)) => {
                    let (group, secret, size) =
                        (self.group(), self.config.secret.clone(), self.size);
                    let accepted = accepted.clone();
                    let running = running.clone();
                    running.fetch_add(1, Ordering::SeqCst);
                    thread::spawn(move || {
                        let me = Identity {
                            group: &group,
                            rank,
                            size,
                            secret: &secret,
                        };
                        match answer(stream, &me) {
                            Ok((peer, stream)) => {
                                // The receiver is gone once the group formed or failed.
                                let _ = accepted.send((peer, stream, addr));
                            }
                            Err(reason) => tracing::warn!(
                                "rank {rank}: refused a connection from {addr}: {reason}"
                            ),
                        }
                        running.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
                Err(e) => {
                    tracing::warn!("rank {rank}: accepting a connection failed: {e}");
                    thread::sleep(ACCEPT_POLL);
                }
            }
        }
    }
}

/// Runs the listener's handshake on an accepted connection.
fn answer(stream: TcpStream, me: &Identity<'_>) -> std::result::Result<(usize, TcpStream), String> {
    let setup = stream
        .set_nonblocking(false)
        .and_then(|()| socket::tune_accepted(&stream));
    setup.map_err(|e| format!("setting up the connection failed: {e}"))?;
    let peer = handshake::answer(&mut Deadlined::new(&stream), me, |r| {
        r > me.rank && r < me.size
    })?;
    Ok((peer, stream))
}

fn rank_list(ranks: &[usize]) -> String {
    let names: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
    match ranks {
        [_] => format!("rank {}", names[0]),
        _ => format!("ranks {}", names.join(", ")),
    }
}
