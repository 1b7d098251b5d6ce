//! The rendezvous server: a [`MemoryStore`] served over TCP to the ranks of one job.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use hvd_core::{Error, MemoryStore, Result, Store};

use super::wire::{
    Direction, FrameError, MAGIC, MAX_BODY, MAX_FIRST_BODY, NONCE_BYTES, Request, Response,
    read_frame, write_frame, write_refusal,
};

/// How long a new connection may stay silent before it is dropped as a stray.
const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are refused, so strays cannot exhaust threads.
const MAX_CONNECTIONS: usize = 1024;

/// Serves one job's store until dropped.
///
/// Every request must carry the job secret's HMAC (see the protocol in `wire.rs`); a
/// request without a valid one is refused, logged at warn with the peer's address, and
/// its connection closed. Nothing a client sends can stop the server or reach the store
/// unauthenticated.
pub struct StoreServer {
    addr: SocketAddr,
    store: Arc<MemoryStore>,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for StoreServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreServer")
            .field("addr", &self.addr)
            .field("refused", &self.refused())
            .finish_non_exhaustive()
    }
}

/// What the accept loop and the connection threads share.
struct Shared {
    secret: Vec<u8>,
    stopping: AtomicBool,
    connections: AtomicUsize,
    refused: AtomicUsize,
}

impl StoreServer {
    /// Listens on `bind` (port 0 picks a free port) and serves in background threads.
    pub fn start(bind: SocketAddr, secret: &[u8]) -> Result<StoreServer> {
        let listener = TcpListener::bind(bind)
            .map_err(|e| Error::io(format!("starting the rendezvous server on {bind}"), &e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("reading the rendezvous server's address", &e))?;
        let store = Arc::new(MemoryStore::new());
        let shared = Arc::new(Shared {
            secret: secret.to_vec(),
            stopping: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        });
        let accept = {
            let (store, shared) = (store.clone(), shared.clone());
            std::thread::Builder::new()
                .name("hvd-rendezvous".into())
                .spawn(move || accept_loop(listener, store, shared))
                .map_err(|e| Error::io("starting the rendezvous server's thread", &e))?
        };
        Ok(StoreServer {
            addr,
            store,
            shared,
            accept: Some(accept),
        })
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The served store itself, for the process that runs the server.
    pub fn store(&self) -> Arc<MemoryStore> {
        self.store.clone()
    }

    /// How many connections were refused (bad authentication or garbage) so far.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// Keeps serving for the rest of the process's life (for a rank that serves its job).
    pub fn detach(mut self) {
        self.accept.take();
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the blocking accept so it sees the flag.
        let _ = TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1));
        let _ = accept.join();
    }
}

/// The address that reaches a listener bound to `addr`, which may be a wildcard.
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let mut wake = addr;
    if addr.ip().is_unspecified() {
        wake.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    wake
}

fn accept_loop(listener: TcpListener, store: Arc<MemoryStore>, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "an unknown address".to_string(), |a| a.to_string());
        if shared.connections.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            refuse(&shared, &mut stream, &peer, "too many connections");
            continue;
        }
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let (store, shared) = (store.clone(), shared.clone());
        let spawned = std::thread::Builder::new()
            .name("hvd-rendezvous-conn".into())
            .spawn(move || {
                serve(&mut stream, &peer, &store, &shared);
                let _ = stream.shutdown(Shutdown::Both);
                shared.connections.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            tracing::warn!("rendezvous server: could not start a thread for a connection");
        }
    }
}

fn refuse(shared: &Shared, stream: &mut TcpStream, peer: &str, reason: &str) {
    shared.refused.fetch_add(1, Ordering::Relaxed);
    tracing::warn!("rendezvous server refused a connection from {peer}: {reason}");
    let _ = write_refusal(stream, reason);
}

/// Answers one connection's requests until it closes or misbehaves.
fn serve(stream: &mut TcpStream, peer: &str, store: &MemoryStore, shared: &Shared) {
    let mut nonce = [0u8; NONCE_BYTES];
    if getrandom::fill(&mut nonce).is_err() {
        tracing::warn!("rendezvous server: no randomness for a connection's nonce");
        return;
    }
    let mut greeting = MAGIC.to_vec();
    greeting.extend_from_slice(&nonce);
    if stream.write_all(&greeting).is_err()
        || stream
            .set_read_timeout(Some(FIRST_REQUEST_TIMEOUT))
            .is_err()
    {
        return;
    }
    let secret = &shared.secret;
    for expected in 0u64.. {
        let max_body = if expected == 0 {
            MAX_FIRST_BODY
        } else {
            MAX_BODY
        };
        let body = match read_frame(stream, secret, Direction::Request, &nonce, max_body) {
            Ok(body) => body,
            Err(FrameError::Io(e)) => {
                if expected == 0 && e.kind() != std::io::ErrorKind::UnexpectedEof {
                    refuse(shared, stream, peer, "it sent no request");
                }
                return;
            }
            Err(e @ FrameError::BadTag) => {
                let reason = format!("{e} (HVD_SECRET differs from the job's)");
                return refuse(shared, stream, peer, &reason);
            }
            Err(e) => return refuse(shared, stream, peer, &e.to_string()),
        };
        let (seq, request) = match Request::decode(&body) {
            Ok(decoded) => decoded,
            Err(e) => return refuse(shared, stream, peer, &store_text(e)),
        };
        if seq != expected {
            let reason = format!("request number {seq} where {expected} was due (a replay?)");
            return refuse(shared, stream, peer, &reason);
        }
        if expected == 0 && stream.set_read_timeout(None).is_err() {
            return;
        }
        let response = execute(store, request);
        let body = response.encode(seq);
        if write_frame(stream, secret, Direction::Response, &nonce, &body).is_err() {
            return;
        }
    }
}

fn execute(store: &MemoryStore, request: Request) -> Response {
    let result = match request {
        Request::Set { key, value } => store.set(&key, &value).map(|()| Response::Done),
        Request::Get { key, timeout_ms } => store
            .get(&key, Duration::from_millis(timeout_ms))
            .map(Response::Value),
        Request::TryGet { key } => store
            .try_get(&key)
            .map(|v| v.map_or(Response::Missing, Response::Value)),
        Request::Add { key, delta } => store.add(&key, delta).map(Response::Counter),
        Request::Delete { key } => store.delete(&key).map(Response::Removed),
        Request::Hello => Ok(Response::Done),
    };
    result.unwrap_or_else(|e| Response::Failed(store_text(e)))
}

/// What the store says went wrong, without the "store: " every store error starts with.
fn store_text(e: Error) -> String {
    match e {
        Error::Store(text) => text,
        other => other.to_string(),
    }
}
