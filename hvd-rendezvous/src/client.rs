//! A rank's connection to the rendezvous server: a [`Store`] over TCP.

use std::io::Read;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hvd_core::{Error, Result, Store};

use super::wire::{
    Direction, FrameError, MAGIC, MAX_BODY, NONCE_BYTES, Request, Response, read_frame, write_frame,
};

/// How long an answer may take beyond the wait the request itself asked for.
const ANSWER_GRACE: Duration = Duration::from_secs(30);

/// The longest wait one request asks the server for. A longer `get` (up to "forever",
/// `Duration::MAX`) is a series of such requests, so that every read of an answer has a
/// deadline and a server or connection that went silent is found within this and the
/// grace, however long the caller is prepared to wait for the key.
const REQUEST_WAIT: Duration = Duration::from_secs(60);

/// A [`Store`] kept by a [`StoreServer`](super::StoreServer), reached over TCP.
pub struct TcpStore {
    addr: SocketAddr,
    secret: Vec<u8>,
    conn: Mutex<Connection>,
    /// [`REQUEST_WAIT`] and [`ANSWER_GRACE`]; shorter in tests.
    request_wait: Duration,
    answer_grace: Duration,
}

impl std::fmt::Debug for TcpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStore")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

struct Connection {
    stream: TcpStream,
    nonce: [u8; NONCE_BYTES],
    seq: u64,
}

impl TcpStore {
    /// Connects to the server at `addr` (`host:port`), retrying until `timeout` while
    /// nothing listens there yet (the server may start after its clients).
    pub fn connect(addr: &str, secret: &[u8], timeout: Duration) -> Result<TcpStore> {
        let resolved = resolve(addr)?;
        // A "forever" timeout (Duration::MAX) must not overflow the clock.
        let deadline = Instant::now() + timeout.min(Duration::from_secs(1 << 40));
        let mut pause = Duration::from_millis(20);
        let stream = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt = left.clamp(Duration::from_millis(1), Duration::from_secs(10));
            match TcpStream::connect_timeout(&resolved, attempt) {
                Ok(stream) => break stream,
                Err(e) if left.is_zero() => {
                    return Err(Error::Store(format!(
                        "cannot reach the rendezvous server at {addr} within {}s: {e} (is the launcher, or rank 0, running and reachable from this host?)",
                        timeout.as_secs_f64()
                    )));
                }
                Err(_) => {
                    std::thread::sleep(pause.min(left));
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
            }
        };
        let conn = greet(stream, addr)?;
        let store = TcpStore {
            addr: resolved,
            secret: secret.to_vec(),
            conn: Mutex::new(conn),
            request_wait: REQUEST_WAIT,
            answer_grace: ANSWER_GRACE,
        };
        match store.call(Request::Hello, Duration::ZERO)? {
            Response::Done => Ok(store),
            other => Err(unexpected(store.addr, other)),
        }
    }

    /// The same store with shorter waits per request, for tests of a silent server.
    #[cfg(test)]
    pub(crate) fn with_limits(mut self, request_wait: Duration, answer_grace: Duration) -> Self {
        self.request_wait = request_wait;
        self.answer_grace = answer_grace;
        self
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn lock(&self) -> Result<MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| Error::Store("a thread panicked while using the rendezvous store".into()))
    }

    /// Sends one request and waits up to `wait` plus a grace for its answer.
    fn call(&self, request: Request, wait: Duration) -> Result<Response> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Error::Store(format!("rendezvous server {}: {what}: {e}", self.addr))
        };
        let mut conn = self.lock()?;
        let conn = &mut *conn;
        let seq = conn.seq;
        conn.seq += 1;
        // A server that is alive but stopped (SIGSTOP, swapped out) takes no bytes: a
        // large request would wait in the kernel for ever.
        conn.stream
            .set_write_timeout(Some(self.request_wait + self.answer_grace))
            .map_err(|e| failed("setting a timeout", &e))?;
        write_frame(
            &mut conn.stream,
            &self.secret,
            Direction::Request,
            &conn.nonce,
            &request.encode(seq),
        )
        .map_err(|e| failed("sending a request", &e))?;
        // Bounded whatever the caller asked: `get` asks for at most `request_wait`.
        let limit = wait.min(self.request_wait) + self.answer_grace;
        conn.stream
            .set_read_timeout(Some(limit))
            .map_err(|e| failed("setting a timeout", &e))?;
        let body = read_frame(
            &mut conn.stream,
            &self.secret,
            Direction::Response,
            &conn.nonce,
            MAX_BODY,
        )
        .map_err(|e| match e {
            FrameError::Refused(reason) => Error::Store(format!(
                "rendezvous server {} refused this rank's request: {reason}",
                self.addr
            )),
            FrameError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => failed(
                "waiting for an answer",
                &"the server closed the connection (has the launcher exited?)",
            ),
            other => failed("waiting for an answer", &other),
        })?;
        let (answered, response) = Response::decode(&body).map_err(|e| match e {
            Error::Store(reason) => {
                Error::Store(format!("rendezvous server {}: {reason}", self.addr))
            }
            other => other,
        })?;
        if answered != seq {
            let reason = format!("answer number {answered} where {seq} was due");
            return Err(failed("reading an answer", &reason));
        }
        Ok(response)
    }
}

fn resolve(addr: &str) -> Result<SocketAddr> {
    let bad = |why: String| Error::Config {
        name: "rendezvous address".into(),
        value: addr.into(),
        expected: format!("host:port of the rendezvous server ({why})"),
    };
    addr.to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("the host has no address".into()))
}

/// Reads the server's greeting: the protocol's magic and this connection's nonce.
fn greet(mut stream: TcpStream, addr: &str) -> Result<Connection> {
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(ANSWER_GRACE))
        .map_err(|e| Error::io(format!("connecting to the rendezvous server {addr}"), &e))?;
    let mut greeting = [0u8; MAGIC.len() + NONCE_BYTES];
    stream.read_exact(&mut greeting).map_err(|e| {
        Error::Store(format!(
            "{addr} did not greet as an hvd rendezvous server: {e}"
        ))
    })?;
    if &greeting[..MAGIC.len()] != MAGIC {
        return Err(Error::Store(format!(
            "{addr} is not an hvd rendezvous server (or speaks another version)"
        )));
    }
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.copy_from_slice(&greeting[MAGIC.len()..]);
    Ok(Connection {
        stream,
        nonce,
        seq: 0,
    })
}

fn unexpected(addr: SocketAddr, response: Response) -> Error {
    match response {
        Response::Failed(text) => Error::Store(text),
        other => Error::Store(format!(
            "rendezvous server {addr} gave an answer of the wrong kind: {other:?}"
        )),
    }
}

impl Store for TcpStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        // The server would refuse the frame; here the key can be named.
        if value.len() > MAX_BODY {
            return Err(Error::Store(format!(
                "the value of key '{key}' is {} bytes, more than the {MAX_BODY} a rendezvous store holds",
                value.len()
            )));
        }
        let request = Request::Set {
            key: key.into(),
            value: value.to_vec(),
        };
        match self.call(request, Duration::ZERO)? {
            Response::Done => Ok(()),
            other => Err(unexpected(self.addr, other)),
        }
    }

    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            let wait = left.min(self.request_wait);
            let request = Request::Get {
                key: key.into(),
                timeout_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            };
            match self.call(request, wait)? {
                Response::Value(value) => return Ok(value),
                // The server's wait ran out. A plain read says whether the key is there
                // now, and fails on its own if the server failed for another reason.
                Response::Failed(_) => {
                    if let Some(value) = self.try_get(key)? {
                        return Ok(value);
                    }
                    if wait >= left {
                        return Err(hvd_core::store::timeout_error(key, timeout));
                    }
                }
                other => return Err(unexpected(self.addr, other)),
            }
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match self.call(Request::TryGet { key: key.into() }, Duration::ZERO)? {
            Response::Value(value) => Ok(Some(value)),
            Response::Missing => Ok(None),
            other => Err(unexpected(self.addr, other)),
        }
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let request = Request::Add {
            key: key.into(),
            delta,
        };
        match self.call(request, Duration::ZERO)? {
            Response::Counter(value) => Ok(value),
            other => Err(unexpected(self.addr, other)),
        }
    }

    fn delete(&self, key: &str) -> Result<bool> {
        match self.call(Request::Delete { key: key.into() }, Duration::ZERO)? {
            Response::Removed(was) => Ok(was),
            other => Err(unexpected(self.addr, other)),
        }
    }
}
