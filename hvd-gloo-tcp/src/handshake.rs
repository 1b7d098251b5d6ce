//! The handshake every connection starts with: which protocol, which job and group, which
//! ranks, and proof in both directions that both ends hold the shared secret.
//!
//! ```text
//! dialer (higher rank)                       listener (lower rank)
//!   HELLO(version, group, rank, size, Nd) ->
//!                                        <-  HELLO(version, group, rank, size, Nl)
//!                                        <-  HMAC(secret, "listener" | ids | Nd | Nl)
//!   HMAC(secret, "dialer" | ids | Nd | Nl) ->
//!                                        <-  ACCEPTED
//! ```
//! Both nonces are fresh random bytes, so a recorded handshake cannot be replayed, and the
//! role labels keep one side's proof from being reflected back as the other's. The
//! listener checks everything it can before it answers; a caller that fails any check is
//! dropped without a word.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hvd_core::auth::{self, PROOF_BYTES};
use hvd_core::{Error, Result};

/// A whole handshake must finish within this, however the peer paces its bytes.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection during its handshake: every read and write may only use what is left of
/// one deadline, so a peer that trickles a byte at a time cannot hold it open for longer
/// than [`HANDSHAKE_TIMEOUT`].
pub(crate) struct Deadlined<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl<'a> Deadlined<'a> {
    pub(crate) fn new(stream: &'a TcpStream) -> Self {
        Deadlined {
            stream,
            deadline: Instant::now() + HANDSHAKE_TIMEOUT,
        }
    }

    /// Sets the socket's timeouts to the time left; TimedOut once none is.
    fn arm(&self) -> io::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.set_write_timeout(Some(left))
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        (&mut &*self.stream).read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        (&mut &*self.stream).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&mut &*self.stream).flush()
    }
}

const GREETING: [u8; 8] = *b"hvd-tcp\0";
const VERSION: u16 = 1;
const NONCE_LEN: usize = 32;
/// Fixed part of a HELLO: greeting, version, rank, size, nonce, group length.
const HELLO_FIXED: usize = 8 + 2 + 4 + 4 + NONCE_LEN + 2;
/// Bound on the group name, so a stranger cannot make us allocate much.
const MAX_GROUP_LEN: usize = 1024;
const ACCEPTED: u8 = 0xA5;
/// The labels of the two proofs, so that neither can be reflected back as the other.
const DIALER: &str = "dialer";
const LISTENER: &str = "listener";

/// Who this end is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity<'a> {
    /// Job id and group, which both ends must share.
    pub group: &'a str,
    pub rank: usize,
    pub size: usize,
    pub secret: &'a [u8],
}

#[derive(Debug)]
struct Hello {
    version: u16,
    rank: usize,
    size: usize,
    nonce: [u8; NONCE_LEN],
    group: String,
}

/// Reads a HELLO from `bytes`, as from a stranger's connection (for the fuzz target).
#[cfg(fuzzing)]
pub(crate) fn read_hello(bytes: &[u8]) {
    let _ = Hello::read(&mut &bytes[..]);
}

impl Hello {
    fn fresh(me: &Identity<'_>) -> Result<Hello> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| Error::Io {
            context: "drawing a handshake nonce".into(),
            message: e.to_string(),
            kind: io::ErrorKind::Other,
        })?;
        Ok(Hello {
            version: VERSION,
            rank: me.rank,
            size: me.size,
            nonce,
            group: me.group.to_owned(),
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HELLO_FIXED + self.group.len());
        out.extend_from_slice(&GREETING);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.rank as u32).to_le_bytes());
        out.extend_from_slice(&(self.size as u32).to_le_bytes());
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&(self.group.len() as u16).to_le_bytes());
        out.extend_from_slice(self.group.as_bytes());
        out
    }

    /// Reads a HELLO; `Err` is the reason to drop the connection.
    fn read(stream: &mut impl Read) -> std::result::Result<Hello, String> {
        let mut fixed = [0u8; HELLO_FIXED];
        read_exact(stream, &mut fixed, "greeting")?;
        if fixed[..8] != GREETING {
            return Err(format!(
                "not an hvd-tcp peer: it opened with bytes {:02x?}",
                &fixed[..8]
            ));
        }
        let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
        let u32_at =
            |i: usize| u32::from_le_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
        let version = u16_at(8);
        if version != VERSION {
            return Err(format!(
                "it speaks hvd-tcp protocol version {version}, this rank speaks {VERSION}"
            ));
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&fixed[18..18 + NONCE_LEN]);
        let group_len = usize::from(u16_at(18 + NONCE_LEN));
        if group_len > MAX_GROUP_LEN {
            return Err(format!(
                "its job and group name is {group_len} bytes long, more than {MAX_GROUP_LEN}"
            ));
        }
        let mut group = vec![0u8; group_len];
        read_exact(stream, &mut group, "job and group name")?;
        Ok(Hello {
            version,
            rank: u32_at(10) as usize,
            size: u32_at(14) as usize,
            nonce,
            group: String::from_utf8_lossy(&group).into_owned(),
        })
    }

    /// Checks that the other end belongs to the same job, group and size.
    fn check_peer_of(&self, me: &Identity<'_>) -> std::result::Result<(), String> {
        if self.group != me.group {
            return Err(format!(
                "it belongs to job/group {:?}, this rank to {:?} (different HVD_JOB_ID?)",
                self.group, me.group
            ));
        }
        if self.size != me.size {
            return Err(format!(
                "it says the group has {} ranks, this rank says {}",
                self.size, me.size
            ));
        }
        Ok(())
    }
}

fn read_exact(
    stream: &mut impl Read,
    buf: &mut [u8],
    what: &str,
) -> std::result::Result<(), String> {
    stream.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("it sent no {what} within {HANDSHAKE_TIMEOUT:?}")
        }
        io::ErrorKind::UnexpectedEof => format!("it closed the connection before its {what}"),
        _ => format!("reading its {what} failed: {e}"),
    })
}

/// What both proofs cover besides their role: the job and group, both ranks, the group
/// size and both nonces. The group is the only part of varying length, and both ends have
/// checked that it is the same.
fn transcript(me: &Identity<'_>, dialer: &Hello, listener: &Hello) -> Vec<u8> {
    let mut out = me.group.as_bytes().to_vec();
    for number in [dialer.rank, listener.rank, me.size] {
        out.extend_from_slice(&(number as u64).to_le_bytes());
    }
    out.extend_from_slice(&dialer.nonce);
    out.extend_from_slice(&listener.nonce);
    out
}

/// Runs the dialer's side against `peer`; `describe` names the peer in errors
/// ("rank 0 at 10.0.0.1:4000").
pub(crate) fn dial(
    stream: &mut (impl Read + Write),
    me: &Identity<'_>,
    peer: usize,
    describe: &str,
) -> Result<()> {
    let fail = |reason: String| Error::Protocol {
        rank: me.rank,
        peer: describe.to_owned(),
        reason: format!("handshake failed: {reason}"),
    };
    let io_fail = |e: io::Error| fail(format!("sending failed: {e}"));
    let hello = Hello::fresh(me)?;
    stream.write_all(&hello.encode()).map_err(io_fail)?;
    let theirs = Hello::read(stream).map_err(|reason| {
        fail(format!(
            "{reason} (it refuses callers of another job, group size or protocol version)"
        ))
    })?;
    theirs.check_peer_of(me).map_err(fail)?;
    if theirs.rank != peer {
        return Err(fail(format!(
            "it answered as rank {} (stale address in the store?)",
            theirs.rank
        )));
    }
    let transcript = transcript(me, &hello, &theirs);
    let mut their_proof = [0u8; PROOF_BYTES];
    read_exact(stream, &mut their_proof, "proof of the shared secret").map_err(fail)?;
    if !auth::verify(me.secret, LISTENER, &[&transcript], &their_proof) {
        return Err(fail(
            "it could not prove that it holds the shared secret (HVD_SECRET differs between ranks)"
                .into(),
        ));
    }
    let mine = auth::prove(me.secret, DIALER, &[&transcript]);
    stream.write_all(&mine).map_err(io_fail)?;
    let mut accepted = [0u8; 1];
    // Its proof already showed the secrets match, so a missing acceptance is its own
    // failure (or refusal for another reason, which it logs): say what was seen.
    read_exact(stream, &mut accepted, "acceptance of this rank's proof").map_err(fail)?;
    if accepted[0] != ACCEPTED {
        return Err(fail(format!(
            "it answered {:#04x} instead of accepting",
            accepted[0]
        )));
    }
    Ok(())
}

/// Runs the listener's side. `expected` says whether a rank may connect here. Returns the
/// caller's rank, or the reason to drop the connection.
pub(crate) fn answer(
    stream: &mut (impl Read + Write),
    me: &Identity<'_>,
    expected: impl Fn(usize) -> bool,
) -> std::result::Result<usize, String> {
    let theirs = Hello::read(stream)?;
    theirs.check_peer_of(me)?;
    if !expected(theirs.rank) {
        return Err(format!(
            "it claims rank {}, which is not a rank that connects to rank {} of {}",
            theirs.rank, me.rank, me.size
        ));
    }
    let hello = Hello::fresh(me).map_err(|e| e.to_string())?;
    let transcript = transcript(me, &theirs, &hello);
    let mut reply = hello.encode();
    reply.extend_from_slice(&auth::prove(me.secret, LISTENER, &[&transcript]));
    stream
        .write_all(&reply)
        .map_err(|e| format!("answering failed: {e}"))?;
    let mut their_proof = [0u8; PROOF_BYTES];
    read_exact(stream, &mut their_proof, "proof of the shared secret")?;
    if !auth::verify(me.secret, DIALER, &[&transcript], &their_proof) {
        return Err(format!(
            "rank {} could not prove that it holds the shared secret (HVD_SECRET differs between ranks?)",
            theirs.rank
        ));
    }
    stream
        .write_all(&[ACCEPTED])
        .map_err(|e| format!("accepting failed: {e}"))?;
    Ok(theirs.rank)
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::thread;

    use super::*;

    #[test]
    fn a_peer_that_trickles_bytes_is_cut_off_at_the_handshake_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let trickler = thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            // One byte every 400 ms: each read is quick, the whole never arrives.
            for _ in 0..40 {
                if stream.write_all(b"h").is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(400));
            }
        });
        let (stream, _) = listener.accept().unwrap();
        let started = Instant::now();
        let mut hello = [0u8; HELLO_FIXED];
        let err = read_exact(&mut Deadlined::new(&stream), &mut hello, "greeting").unwrap_err();
        let took = started.elapsed();
        drop(stream);
        trickler.join().unwrap();
        assert_eq!(err, "it sent no greeting within 5s");
        assert!(
            took < HANDSHAKE_TIMEOUT + Duration::from_secs(1),
            "{took:?}"
        );
    }

    fn identity<'a>(rank: usize, group: &'a str, secret: &'a [u8]) -> Identity<'a> {
        Identity {
            group,
            rank,
            size: 2,
            secret,
        }
    }

    /// Runs a dialer (rank 1) against a listener (rank 0) over loopback.
    fn run(
        dialer: Identity<'static>,
        listener: Identity<'static>,
    ) -> (Result<()>, std::result::Result<usize, String>) {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let answered = thread::spawn(move || {
            let (mut stream, _) = server.accept().unwrap();
            stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).unwrap();
            answer(&mut stream, &listener, |r| r == 1)
        });
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).unwrap();
        let dialed = dial(&mut stream, &dialer, 0, "rank 0");
        drop(stream);
        (dialed, answered.join().unwrap())
    }

    #[test]
    fn matching_ends_agree() {
        let (dialed, answered) = run(identity(1, "job", b"k"), identity(0, "job", b"k"));
        dialed.unwrap();
        assert_eq!(answered, Ok(1));
    }

    #[test]
    fn a_wrong_secret_is_refused_on_both_ends() {
        let (dialed, answered) = run(identity(1, "job", b"wrong"), identity(0, "job", b"k"));
        assert_eq!(
            dialed.unwrap_err().to_string(),
            "rank 1: protocol error from rank 0: handshake failed: it could not prove that it holds the shared secret (HVD_SECRET differs between ranks)"
        );
        assert_eq!(
            answered.unwrap_err(),
            "it closed the connection before its proof of the shared secret"
        );
    }

    #[test]
    fn another_job_is_refused_before_any_proof() {
        let (dialed, answered) = run(identity(1, "job-a", b""), identity(0, "job-b", b""));
        assert_eq!(
            answered.unwrap_err(),
            "it belongs to job/group \"job-a\", this rank to \"job-b\" (different HVD_JOB_ID?)"
        );
        assert_eq!(
            dialed.unwrap_err().to_string(),
            "rank 1: protocol error from rank 0: handshake failed: it closed the connection before its greeting (it refuses callers of another job, group size or protocol version)"
        );
    }

    #[test]
    fn garbage_is_not_a_peer() {
        let mut garbage: &[u8] =
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n+padding+padding+padding+padding+padding";
        let mut sink = Vec::new();
        let mut stream = ReadWrite(&mut garbage, &mut sink);
        let err = answer(&mut stream, &identity(0, "job", b""), |_| true).unwrap_err();
        assert_eq!(
            err,
            "not an hvd-tcp peer: it opened with bytes [47, 45, 54, 20, 2f, 20, 48, 54]"
        );
        assert!(sink.is_empty(), "a stranger gets no answer");
    }

    #[test]
    fn an_oversized_group_name_is_refused_before_allocation() {
        let mut hello = Hello::fresh(&identity(1, "job", b"")).unwrap().encode();
        let at = HELLO_FIXED - 2;
        hello[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        let mut bytes: &[u8] = &hello;
        let mut sink = Vec::new();
        let err = answer(
            &mut ReadWrite(&mut bytes, &mut sink),
            &identity(0, "job", b""),
            |_| true,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "its job and group name is 65535 bytes long, more than 1024"
        );
    }

    /// A stream made of a reader and a writer, for handshakes against fixed bytes.
    struct ReadWrite<'a, R, W>(&'a mut R, &'a mut W);

    impl<R: Read, W: Write> Read for ReadWrite<'_, R, W> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read(buf)
        }
    }

    impl<R: Read, W: Write> Write for ReadWrite<'_, R, W> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.1.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            self.1.flush()
        }
    }
}
