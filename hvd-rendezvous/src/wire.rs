//! The rendezvous protocol's messages and their authentication.
//!
//! On connect the server sends `HVDSTOR2` and a fresh 16-byte nonce. Every message after
//! that is a frame `[u32 body length][body][32-byte tag]`, where the tag is
//! HMAC-SHA256 under the job secret of a direction byte, the connection's nonce and the
//! body. A request body starts with a sequence number that must count up from 0, so a
//! recorded request cannot be replayed on this or any other connection. Bodies are
//! written with [`hvd_core::wire`], and every number is little-endian:
//!
//! ```text
//! request  = u64 seq, u8 kind, then by kind:
//!            0 set: key, bytes value | 1 get: key, u64 timeout_ms | 2 try_get: key
//!            3 add: key, i64 delta | 4 delete: key | 5 hello
//! response = u64 seq, u8 kind, then by kind:
//!            0 done | 1 value: bytes | 2 missing | 3 counter: i64
//!            4 removed: u8 (0 | 1) | 5 failed: string
//! key      = string
//! bytes    = u32 length, the bytes;  string = bytes of UTF-8
//! ```
//!
//! Version 2 changed the byte order from big- to little-endian, as every other hvd
//! protocol has it.

use std::io::{Read, Write};

use hvd_core::auth::{self, PROOF_BYTES};
use hvd_core::wire::{Reader, Writer};
use hvd_core::{Error, Result};

/// The greeting's first bytes: who is speaking, and which version of the protocol.
pub const MAGIC: &[u8; 8] = b"HVDSTOR2";
pub const NONCE_BYTES: usize = 16;
/// Values are addresses and small tables; anything near this is garbage on the socket.
pub const MAX_BODY: usize = 16 << 20;
/// A connection's first request is a hello of a few bytes: until one is authenticated,
/// no stray can make the server allocate more than this.
pub const MAX_FIRST_BODY: usize = 1024;

/// Which way a frame goes: each direction signs differently, so a server reply cannot be
/// passed off as a request.
#[derive(Debug, Clone, Copy)]
pub enum Direction {
    Request,
    Response,
}

impl Direction {
    /// The label of its tags.
    fn label(self) -> &'static str {
        match self {
            Direction::Request => "Q",
            Direction::Response => "R",
        }
    }
}

/// Writes one signed frame.
pub fn write_frame(
    stream: &mut impl Write,
    secret: &[u8],
    direction: Direction,
    nonce: &[u8],
    body: &[u8],
) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(4 + body.len() + PROOF_BYTES);
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(body);
    frame.extend_from_slice(&auth::prove(secret, direction.label(), &[nonce, body]));
    stream.write_all(&frame)
}

/// What reading a frame can find besides a good one.
#[derive(Debug)]
pub enum FrameError {
    Io(std::io::Error),
    /// A length beyond what the reader accepts (the second number): not our protocol.
    TooLong(usize, usize),
    /// The tag does not match: the sender does not hold the job secret.
    BadTag,
    /// The server refused the connection, for the reason given.
    Refused(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "{e}"),
            FrameError::TooLong(n, max) => write!(
                f,
                "a frame of {n} bytes (at most {max} expected): not the hvd rendezvous protocol"
            ),
            FrameError::BadTag => {
                write!(
                    f,
                    "authentication failed: the sender does not hold the job secret"
                )
            }
            FrameError::Refused(reason) => write!(f, "refused: {reason}"),
        }
    }
}

/// Reads one frame of at most `max_body` bytes and checks its tag; returns the body.
pub fn read_frame(
    stream: &mut impl Read,
    secret: &[u8],
    direction: Direction,
    nonce: &[u8],
    max_body: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(FrameError::Io)?;
    let len = u32::from_le_bytes(len);
    if len == REFUSAL {
        return Err(FrameError::Refused(read_refusal(stream)));
    }
    let len = len as usize;
    if len > max_body {
        return Err(FrameError::TooLong(len, max_body));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).map_err(FrameError::Io)?;
    let mut received = [0u8; PROOF_BYTES];
    stream.read_exact(&mut received).map_err(FrameError::Io)?;
    if !auth::verify(secret, direction.label(), &[nonce, &body], &received) {
        return Err(FrameError::BadTag);
    }
    Ok(body)
}

/// The length that marks a refusal instead of a frame. A refusal is not signed: the
/// client it is meant for may not hold the secret, and forging one gains nothing that
/// closing the connection would not.
const REFUSAL: u32 = u32::MAX;
/// Refusal reasons are one line of text.
const MAX_REFUSAL: usize = 1024;

/// Tells the other side why it is being disconnected.
pub fn write_refusal(stream: &mut impl Write, reason: &str) -> std::io::Result<()> {
    let reason = &reason.as_bytes()[..reason.len().min(MAX_REFUSAL)];
    let mut frame = REFUSAL.to_le_bytes().to_vec();
    frame.extend_from_slice(&(reason.len() as u32).to_le_bytes());
    frame.extend_from_slice(reason);
    stream.write_all(&frame)
}

fn read_refusal(stream: &mut impl Read) -> String {
    let mut len = [0u8; 4];
    if stream.read_exact(&mut len).is_err() {
        return "no reason given".into();
    }
    let len = (u32::from_le_bytes(len) as usize).min(MAX_REFUSAL);
    let mut reason = vec![0u8; len];
    match stream.read_exact(&mut reason) {
        Ok(()) => String::from_utf8_lossy(&reason).into_owned(),
        Err(_) => "no reason given".into(),
    }
}

/// One store operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Proves the secret as soon as a connection opens, so that a client with nothing
    /// to ask yet is not taken for a stray, and a wrong secret is caught at once.
    Hello,
    Set {
        key: String,
        value: Vec<u8>,
    },
    /// Wait up to `timeout_ms` (u64::MAX: forever).
    Get {
        key: String,
        timeout_ms: u64,
    },
    TryGet {
        key: String,
    },
    Add {
        key: String,
        delta: i64,
    },
    Delete {
        key: String,
    },
}

/// The server's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Done,
    Value(Vec<u8>),
    Missing,
    Counter(i64),
    Removed(bool),
    /// The store's own error, as text.
    Failed(String),
}

/// Keys and values are bounded by the frame they came in.
const MAX_FIELD: usize = MAX_BODY;

impl Request {
    pub fn encode(&self, seq: u64) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(seq);
        match self {
            Request::Set { key, value } => w.u8(0).str(key).bytes(value),
            Request::Get { key, timeout_ms } => w.u8(1).str(key).u64(*timeout_ms),
            Request::TryGet { key } => w.u8(2).str(key),
            Request::Add { key, delta } => w.u8(3).str(key).i64(*delta),
            Request::Delete { key } => w.u8(4).str(key),
            Request::Hello => w.u8(5),
        };
        w.into_bytes()
    }

    /// The sequence number and the request. A malformed body is an [`Error::Store`]
    /// whose text names the field that was wrong.
    pub fn decode(body: &[u8]) -> Result<(u64, Request)> {
        let mut r = Reader::reporting(body, "malformed request", Error::Store);
        let seq = r.u64("sequence number")?;
        let request = match r.u8("request kind")? {
            0 => Request::Set {
                key: r.string("key", MAX_FIELD)?,
                value: r.bytes("value", MAX_FIELD)?.to_vec(),
            },
            1 => Request::Get {
                key: r.string("key", MAX_FIELD)?,
                timeout_ms: r.u64("timeout")?,
            },
            2 => Request::TryGet {
                key: r.string("key", MAX_FIELD)?,
            },
            3 => Request::Add {
                key: r.string("key", MAX_FIELD)?,
                delta: r.i64("delta")?,
            },
            4 => Request::Delete {
                key: r.string("key", MAX_FIELD)?,
            },
            5 => Request::Hello,
            other => return Err(r.malformed(format_args!("unknown request kind {other}"))),
        };
        r.end()?;
        Ok((seq, request))
    }
}

impl Response {
    pub fn encode(&self, seq: u64) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(seq);
        match self {
            Response::Done => w.u8(0),
            Response::Value(v) => w.u8(1).bytes(v),
            Response::Missing => w.u8(2),
            Response::Counter(c) => w.u8(3).i64(*c),
            Response::Removed(b) => w.u8(4).flag(*b),
            Response::Failed(text) => w.u8(5).str(text),
        };
        w.into_bytes()
    }

    /// The sequence number and the answer, or an [`Error::Store`] naming what is wrong.
    pub fn decode(body: &[u8]) -> Result<(u64, Response)> {
        let mut r = Reader::reporting(body, "malformed answer", Error::Store);
        let seq = r.u64("sequence number")?;
        let response = match r.u8("answer kind")? {
            0 => Response::Done,
            1 => Response::Value(r.bytes("value", MAX_FIELD)?.to_vec()),
            2 => Response::Missing,
            3 => Response::Counter(r.i64("counter")?),
            4 => Response::Removed(r.flag("removed flag")?),
            5 => Response::Failed(r.string("failure", MAX_FIELD)?),
            other => return Err(r.malformed(format_args!("unknown answer kind {other}"))),
        };
        r.end()?;
        Ok((seq, response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_responses_survive_encoding() {
        let requests = [
            Request::Set {
                key: "k".into(),
                value: vec![1, 2, 3],
            },
            Request::Get {
                key: "g".into(),
                timeout_ms: u64::MAX,
            },
            Request::TryGet { key: "t".into() },
            Request::Add {
                key: "a".into(),
                delta: -5,
            },
            Request::Delete { key: "d".into() },
            Request::Hello,
        ];
        for (seq, request) in requests.into_iter().enumerate() {
            let body = request.encode(seq as u64);
            assert_eq!(Request::decode(&body).unwrap(), (seq as u64, request));
        }
        let responses = [
            Response::Done,
            Response::Value(vec![9]),
            Response::Missing,
            Response::Counter(-7),
            Response::Removed(true),
            Response::Failed("no".into()),
        ];
        for response in responses {
            assert_eq!(
                Response::decode(&response.encode(3)).unwrap(),
                (3, response)
            );
        }
    }

    /// The text of a decoding error.
    fn reason<T: std::fmt::Debug>(decoded: Result<T>) -> String {
        match decoded.unwrap_err() {
            Error::Store(text) => text,
            other => panic!("not a store error: {other}"),
        }
    }

    #[test]
    fn truncated_or_padded_bodies_are_rejected_naming_the_field() {
        let body = Request::TryGet { key: "key".into() }.encode(0);
        for cut in 0..body.len() {
            let reason = reason(Request::decode(&body[..cut]));
            assert!(
                reason.starts_with("malformed request: truncated: expected "),
                "cut at {cut}: {reason}"
            );
        }
        assert_eq!(
            reason(Request::decode(&body[..3])),
            "malformed request: truncated: expected 8 bytes for the sequence number, 3 left"
        );
        assert_eq!(
            reason(Request::decode(&body[..14])),
            "malformed request: truncated: expected 3 bytes for the key, 1 left"
        );
        let mut padded = body.clone();
        padded.push(0);
        assert_eq!(
            reason(Request::decode(&padded)),
            "malformed request: 1 byte after the last field"
        );
        let mut unknown = body.clone();
        unknown[8] = 9;
        assert_eq!(
            reason(Request::decode(&unknown)),
            "malformed request: unknown request kind 9"
        );
        let mut removed = Response::Removed(true).encode(0);
        removed[9] = 2;
        assert_eq!(
            reason(Response::decode(&removed)),
            "malformed answer: the removed flag is 2, not 0 or 1"
        );
    }

    #[test]
    fn numbers_are_little_endian() {
        let body = Request::Add {
            key: "k".into(),
            delta: -2,
        }
        .encode(1);
        assert_eq!(
            body,
            [
                1, 0, 0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, b'k', 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff, 0xff
            ]
        );
        let mut frame = Vec::new();
        write_frame(&mut frame, b"", Direction::Request, &[], &body).unwrap();
        assert_eq!(frame[..4], [22, 0, 0, 0]);
    }

    #[test]
    fn a_frame_signed_with_another_secret_or_direction_is_refused() {
        let nonce = [7u8; NONCE_BYTES];
        let mut frame = Vec::new();
        write_frame(&mut frame, b"right", Direction::Request, &nonce, b"body").unwrap();
        let read = |secret: &[u8], direction| {
            read_frame(&mut frame.as_slice(), secret, direction, &nonce, MAX_BODY)
        };
        assert_eq!(read(b"right", Direction::Request).unwrap(), b"body");
        assert!(matches!(
            read(b"wrong", Direction::Request),
            Err(FrameError::BadTag)
        ));
        assert!(matches!(
            read(b"right", Direction::Response),
            Err(FrameError::BadTag)
        ));
        let other_nonce = [8u8; NONCE_BYTES];
        assert!(matches!(
            read_frame(
                &mut frame.as_slice(),
                b"right",
                Direction::Request,
                &other_nonce,
                MAX_BODY
            ),
            Err(FrameError::BadTag)
        ));
    }

    #[test]
    fn an_oversized_length_is_named_before_anything_is_allocated() {
        let bytes = (MAX_BODY as u32 + 1).to_le_bytes();
        let err = read_frame(
            &mut bytes.as_slice(),
            b"",
            Direction::Request,
            &[],
            MAX_BODY,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "a frame of 16777217 bytes (at most 16777216 expected): not the hvd rendezvous protocol"
        );
    }
}
