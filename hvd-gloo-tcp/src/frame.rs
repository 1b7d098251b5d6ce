//! The frame header that precedes every message on an established connection.
//!
//! ```text
//! 0      4     5     6       8      12      16              24
//! | magic | kind | op | 0 0 | seq  | item  |   length (u64)  |  payload (length bytes)
//! ```
//! All numbers are little-endian. `seq` counts the collective calls of the group, `item`
//! counts the frames one rank sends another within a call, and `length` is the payload
//! size. The receiver knows all of them in advance and checks each one, so a desynchronised
//! peer, a peer that passed a different size, or garbage is caught at the first frame.
//!
//! An ABORT frame (kind 2) carries `culprit (u32) | reporter (u32) | cause (UTF-8)`: the
//! rank whose failure ended the job, the rank that saw it happen, and what it saw.

use std::fmt;

use hvd_core::OpKind;
pub(crate) use hvd_core::driver::Abort;

pub(crate) const HEADER_LEN: usize = 24;
const MAGIC: u32 = u32::from_le_bytes(*b"HvdF");
/// Longest cause an ABORT frame carries, so that reading one is bounded.
pub(crate) const MAX_ABORT_LEN: usize = 4096;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Data = 1,
    Abort = 2,
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: Kind,
    pub op: OpKind,
    pub seq: u32,
    pub item: u32,
    pub len: u64,
}

/// Why received header bytes are not a header this rank can accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unexpected {
    /// Not a frame at all.
    Garbage(String),
    /// A frame of another call: the ranks are not running the same sequence of calls.
    OutOfStep(String),
    /// The expected frame with another length: the ranks passed different sizes.
    Length { theirs: u64, ours: u64 },
}

impl fmt::Display for Unexpected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unexpected::Garbage(what) | Unexpected::OutOfStep(what) => f.write_str(what),
            Unexpected::Length { theirs, ours } => write!(
                f,
                "a frame of {theirs} bytes where this rank expects {ours} (the ranks passed tensors of different sizes or counts)"
            ),
        }
    }
}

impl Header {
    pub(crate) fn data(op: OpKind, seq: u32, item: u32, len: usize) -> Header {
        Header {
            kind: Kind::Data,
            op,
            seq,
            item,
            len: len as u64,
        }
    }

    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4] = self.kind as u8;
        out[5] = self.op.code();
        out[8..12].copy_from_slice(&self.seq.to_le_bytes());
        out[12..16].copy_from_slice(&self.item.to_le_bytes());
        out[16..24].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes header bytes; anything that is not a well-formed header is garbage.
    pub(crate) fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Header, Unexpected> {
        let word = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let garbage = |what: String| {
            Err(Unexpected::Garbage(format!(
                "garbage frame header {bytes:02x?}: {what}"
            )))
        };
        if word(0) != MAGIC {
            return garbage(format!("bad magic {:#010x}", word(0)));
        }
        let kind = match bytes[4] {
            1 => Kind::Data,
            2 => Kind::Abort,
            other => return garbage(format!("unknown frame kind {other}")),
        };
        let Some(op) = OpKind::from_code(bytes[5]) else {
            return garbage(format!("unknown operation code {}", bytes[5]));
        };
        let mut len = [0u8; 8];
        len.copy_from_slice(&bytes[16..24]);
        let header = Header {
            kind,
            op,
            seq: word(8),
            item: word(12),
            len: u64::from_le_bytes(len),
        };
        if kind == Kind::Abort && header.len > MAX_ABORT_LEN as u64 {
            return garbage(format!("abort frame of {} bytes", header.len));
        }
        Ok(header)
    }

    /// Checks a data header against the one this rank expects next.
    pub(crate) fn expect(&self, expected: &Header) -> Result<(), Unexpected> {
        if self.op != expected.op || self.seq != expected.seq {
            return Err(Unexpected::OutOfStep(format!(
                "a frame of call #{} ({}) where this rank runs call #{} ({}): the ranks are not making the same calls in the same order",
                self.seq,
                self.op.name(),
                expected.seq,
                expected.op.name()
            )));
        }
        if self.item != expected.item {
            return Err(Unexpected::OutOfStep(format!(
                "frame {} of the call where this rank expects frame {}",
                self.item, expected.item
            )));
        }
        if self.len != expected.len {
            return Err(Unexpected::Length {
                theirs: self.len,
                ours: expected.len,
            });
        }
        Ok(())
    }
}

/// A whole ABORT frame: header and payload, the cause cut to fit the bound.
pub(crate) fn abort_frame(abort: &Abort, op: OpKind, seq: u32) -> Vec<u8> {
    let payload = abort.encode(MAX_ABORT_LEN - 8);
    let header = Header {
        kind: Kind::Abort,
        op,
        seq,
        item: 0,
        len: payload.len() as u64,
    };
    let mut out = header.encode().to_vec();
    out.extend_from_slice(&payload);
    out
}

/// Decodes the payload of an ABORT frame.
pub(crate) fn read_abort(payload: &[u8]) -> Result<Abort, Unexpected> {
    Abort::decode(payload).ok_or_else(|| {
        Unexpected::Garbage(format!(
            "abort frame of {} bytes, too short to name a rank",
            payload.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header::data(OpKind::Alltoall, 7, 3, 1 << 40);
        assert_eq!(Header::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn garbage_is_named_with_its_bytes() {
        let err = Header::decode(b"GET / HTTP/1.1\r\nHost: ab").unwrap_err();
        assert_eq!(
            err.to_string(),
            "garbage frame header [47, 45, 54, 20, 2f, 20, 48, 54, 54, 50, 2f, 31, 2e, 31, 0d, 0a, 48, 6f, 73, 74, 3a, 20, 61, 62]: bad magic 0x20544547"
        );
        let mut bytes = Header::data(OpKind::Barrier, 1, 0, 0).encode();
        bytes[5] = 99;
        assert!(
            Header::decode(&bytes)
                .unwrap_err()
                .to_string()
                .ends_with("unknown operation code 99")
        );
    }

    #[test]
    fn a_huge_abort_length_is_garbage_not_an_allocation() {
        let mut bytes = Header::data(OpKind::Barrier, 1, 0, 0).encode();
        bytes[4] = Kind::Abort as u8;
        bytes[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            Header::decode(&bytes).unwrap_err().to_string(),
            "garbage frame header [48, 76, 64, 46, 02, 06, 00, 00, 01, 00, 00, 00, 00, 00, 00, 00, \
             ff, ff, ff, ff, ff, ff, ff, ff]: abort frame of 18446744073709551615 bytes"
        );
    }

    #[test]
    fn expectations_name_what_differs() {
        let ours = Header::data(OpKind::Allreduce, 5, 2, 4096);
        let other_call = Header::data(OpKind::Broadcast, 6, 0, 4096);
        assert_eq!(
            other_call.expect(&ours).unwrap_err().to_string(),
            "a frame of call #6 (broadcast) where this rank runs call #5 (allreduce): the ranks are not making the same calls in the same order"
        );
        let other_len = Header::data(OpKind::Allreduce, 5, 2, 2048);
        assert_eq!(
            other_len.expect(&ours),
            Err(Unexpected::Length {
                theirs: 2048,
                ours: 4096
            })
        );
        let other_item = Header::data(OpKind::Allreduce, 5, 3, 4096);
        assert_eq!(
            other_item.expect(&ours).unwrap_err().to_string(),
            "frame 3 of the call where this rank expects frame 2"
        );
    }

    #[test]
    fn aborts_round_trip_and_long_causes_are_cut_on_a_char_boundary() {
        let abort = Abort {
            culprit: 2,
            reporter: 1,
            cause: "connection reset".into(),
        };
        let frame = abort_frame(&abort, OpKind::Allreduce, 9);
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&frame[..HEADER_LEN]);
        let h = Header::decode(&header).unwrap();
        assert_eq!(
            (h.kind, h.len as usize),
            (Kind::Abort, frame.len() - HEADER_LEN)
        );
        assert_eq!(read_abort(&frame[HEADER_LEN..]), Ok(abort));

        let long = Abort {
            culprit: 0,
            reporter: 0,
            cause: "é".repeat(MAX_ABORT_LEN),
        };
        let frame = abort_frame(&long, OpKind::Barrier, 1);
        assert!(frame.len() <= HEADER_LEN + MAX_ABORT_LEN);
        assert!(
            read_abort(&frame[HEADER_LEN..])
                .unwrap()
                .cause
                .starts_with("éé")
        );
        assert_eq!(
            read_abort(&[1, 2]).unwrap_err().to_string(),
            "abort frame of 2 bytes, too short to name a rank"
        );
    }
}
