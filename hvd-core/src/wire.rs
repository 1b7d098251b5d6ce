//! The wire toolkit: how hvd's codecs write, and read back, the bytes one process sends
//! another.
//!
//! Every number is little-endian. Byte strings and strings carry a `u32` length, and
//! lists a `u32` count, in front. [`Writer`] appends fields; [`Reader`] takes them off a
//! message that came from elsewhere, and every read names the field it wants, so that a
//! truncated or malformed message fails with an error saying which field and why:
//!
//! ```
//! use hvd_core::wire::{Reader, Writer};
//!
//! let mut w = Writer::new();
//! w.u64(7).str("grad/w1");
//! let bytes = w.into_bytes();
//!
//! let mut r = Reader::new(&bytes, "announcement", 0, "rank 1");
//! assert_eq!(r.u64("sequence number")?, 7);
//! assert_eq!(r.string("tensor name", 4096)?, "grad/w1");
//! r.end()?;
//!
//! let mut short = Reader::new(&bytes[..3], "announcement", 0, "rank 1");
//! assert_eq!(
//!     short.u64("sequence number").unwrap_err().to_string(),
//!     "rank 0: protocol error from rank 1: announcement: truncated: expected 8 bytes for the sequence number, 3 left"
//! );
//! # Ok::<(), hvd_core::Error>(())
//! ```
//!
//! A stranger's bytes cannot make a reader allocate more than they are: a length is
//! checked against a bound the caller gives and a count against the bytes left, both
//! before anything is allocated.

use std::fmt;

use crate::{Error, Result};

/// Builds a message field by field. Every method returns the writer, so fields chain.
#[derive(Debug, Default, Clone)]
pub struct Writer(Vec<u8>);

impl Writer {
    /// An empty message.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// A writer that will not reallocate before `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> Writer {
        Writer(Vec::with_capacity(bytes))
    }

    /// The message so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// Bytes as they are, with no length: magics and fixed-size fields.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// One byte: a code, a kind, a small number.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.raw(&[v])
    }

    /// A presence flag or yes/no: 1 or 0.
    pub fn flag(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// Four bytes, little-endian.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// Eight bytes, little-endian.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// Eight bytes of two's complement, little-endian.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// The eight bytes of an IEEE 754 double, little-endian: NaNs keep their bits.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A size or index, as a `u64` so that ranks of any word size agree.
    pub fn usize(&mut self, v: usize) -> &mut Self {
        self.u64(v as u64)
    }

    /// The number of items that follow, for [`Reader::count`].
    ///
    /// # Panics
    /// If `n` is more than `u32::MAX`: every codec bounds what it sends far below that.
    pub fn count(&mut self, n: usize) -> &mut Self {
        let n = u32::try_from(n).expect("a wire count or length beyond u32::MAX");
        self.u32(n)
    }

    /// Bytes with their length in front, for [`Reader::bytes`].
    ///
    /// # Panics
    /// If longer than `u32::MAX` bytes, as [`count`](Self::count).
    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.count(bytes.len()).raw(bytes)
    }

    /// A string as [`bytes`](Self::bytes) of its UTF-8, for [`Reader::string`].
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
}

/// Takes fields off a message another process sent. Every read names its field, and
/// fails with an error that says what the message is, which field, and what was wrong
/// with it.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
    blame: Blame<'a>,
}

/// Whom a [`Reader`]'s errors name.
#[derive(Debug, Clone, Copy)]
enum Blame<'a> {
    /// [`Error::Protocol`]: rank `rank` read what `peer` sent.
    Peer { rank: usize, peer: &'a str },
    /// The caller's own error, for ends that are no ranks.
    Report(fn(String) -> Error),
}

impl<'a> Reader<'a> {
    /// Reads `bytes`, a `what` ("timeline events") that `peer` ("rank 3") sent to rank
    /// `rank`. Failures are [`Error::Protocol`] naming both, with a reason that starts
    /// with `what`.
    pub fn new(bytes: &'a [u8], what: &'static str, rank: usize, peer: &'a str) -> Self {
        Reader {
            bytes,
            at: 0,
            what,
            blame: Blame::Peer { rank, peer },
        }
    }

    /// Reads `bytes`, a `what`, for an end that is no rank (the rendezvous store's server
    /// and clients): a failure is `report` of the reason, which starts with `what`.
    pub fn reporting(bytes: &'a [u8], what: &'static str, report: fn(String) -> Error) -> Self {
        Reader {
            bytes,
            at: 0,
            what,
            blame: Blame::Report(report),
        }
    }

    /// How many bytes are left to read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The error for a message that is wrong in a way only its codec can tell (an unknown
    /// code, an index out of range): `reason` says what was found.
    pub fn malformed(&self, reason: impl fmt::Display) -> Error {
        let reason = format!("{}: {reason}", self.what);
        match self.blame {
            Blame::Peer { rank, peer } => Error::Protocol {
                rank,
                peer: peer.to_owned(),
                reason,
            },
            Blame::Report(report) => report(reason),
        }
    }

    /// The next `n` bytes as they are: magics and fixed-size fields.
    pub fn raw(&mut self, field: &str, n: usize) -> Result<&'a [u8]> {
        let left = self.remaining();
        if n > left {
            return Err(self.malformed(format_args!(
                "truncated: expected {} for the {field}, {left} left",
                plural_bytes(n)
            )));
        }
        let taken = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.raw(field, N)?);
        Ok(out)
    }

    /// A byte written by [`Writer::u8`].
    pub fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    /// A flag written by [`Writer::flag`]: exactly 0 or 1, so that a corrupted byte is an
    /// error rather than "yes".
    pub fn flag(&mut self, field: &str) -> Result<bool> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.malformed(format_args!("the {field} is {other}, not 0 or 1"))),
        }
    }

    /// A number written by [`Writer::u32`].
    pub fn u32(&mut self, field: &str) -> Result<u32> {
        self.array(field).map(u32::from_le_bytes)
    }

    /// A number written by [`Writer::u64`].
    pub fn u64(&mut self, field: &str) -> Result<u64> {
        self.array(field).map(u64::from_le_bytes)
    }

    /// A number written by [`Writer::i64`].
    pub fn i64(&mut self, field: &str) -> Result<i64> {
        self.array(field).map(i64::from_le_bytes)
    }

    /// A number written by [`Writer::f64`].
    pub fn f64(&mut self, field: &str) -> Result<f64> {
        self.array(field).map(f64::from_le_bytes)
    }

    /// A size or index written by [`Writer::usize`], which must fit this machine's
    /// `usize`.
    pub fn usize(&mut self, field: &str) -> Result<usize> {
        let v = self.u64(field)?;
        usize::try_from(v)
            .map_err(|_| self.malformed(format_args!("the {field} {v} does not fit a usize")))
    }

    /// A count written by [`Writer::count`] of items that take at least `min_item_bytes`
    /// each: refused when that many cannot fit in the bytes left, so that a caller may
    /// allocate room for them. `items` names them in the plural ("events").
    pub fn count(&mut self, items: &str, min_item_bytes: usize) -> Result<usize> {
        let n = self.u32(&format!("number of {items}"))? as usize;
        let left = self.remaining();
        if n.saturating_mul(min_item_bytes) > left {
            return Err(self.malformed(format_args!(
                "{n} {items} cannot fit in the {} left",
                plural_bytes(left)
            )));
        }
        Ok(n)
    }

    /// Bytes written by [`Writer::bytes`], at most `max` of them: a longer length is
    /// refused before anything is read or allocated.
    pub fn bytes(&mut self, field: &str, max: usize) -> Result<&'a [u8]> {
        let n = self.u32(&format!("length of the {field}"))? as usize;
        if n > max {
            return Err(self.malformed(format_args!(
                "the {field} is {n} bytes long, more than the {max} accepted"
            )));
        }
        self.raw(field, n)
    }

    /// A string written by [`Writer::str`], at most `max` bytes of UTF-8.
    pub fn string(&mut self, field: &str, max: usize) -> Result<String> {
        let bytes = self.bytes(field, max)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(self.malformed(format_args!("the {field} is not UTF-8: {e}"))),
        }
    }

    /// Checks that the message ends here: bytes beyond its last field mean the two ends
    /// do not agree on the format.
    pub fn end(self) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            left => {
                Err(self.malformed(format_args!("{} after the last field", plural_bytes(left))))
            }
        }
    }
}

/// "1 byte", "8 bytes".
fn plural_bytes(n: usize) -> String {
    if n == 1 {
        "1 byte".into()
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &[u8]) -> Reader<'_> {
        Reader::new(bytes, "test message", 2, "rank 5")
    }

    /// The reason of a protocol error, after checking that it names both ranks.
    fn reason(err: Error) -> String {
        match err {
            Error::Protocol { rank, peer, reason } => {
                assert_eq!((rank, peer.as_str()), (2, "rank 5"));
                reason
            }
            other => panic!("not a protocol error: {other}"),
        }
    }

    /// One of every field, and how to read it back.
    fn sample() -> Vec<u8> {
        let mut w = Writer::with_capacity(64);
        w.raw(b"MAGC")
            .u8(200)
            .flag(true)
            .u32(0xDEAD_BEEF)
            .u64(u64::MAX)
            .i64(-5)
            .f64(-0.5)
            .usize(12)
            .count(2)
            .bytes(&[1, 2, 3])
            .str("grad/w1 \"ü\"");
        w.into_bytes()
    }

    fn read_sample(r: &mut Reader<'_>) -> Result<()> {
        assert_eq!(r.raw("magic", 4)?, b"MAGC");
        assert_eq!(r.u8("kind")?, 200);
        assert!(r.flag("clock flag")?);
        assert_eq!(r.u32("row index")?, 0xDEAD_BEEF);
        assert_eq!(r.u64("timestamp")?, u64::MAX);
        assert_eq!(r.i64("clock offset")?, -5);
        assert_eq!(r.f64("prescale")?, -0.5);
        assert_eq!(r.usize("root")?, 12);
        assert_eq!(r.count("tensors", 1)?, 2);
        assert_eq!(r.bytes("value", 16)?, [1, 2, 3]);
        assert_eq!(r.string("tensor name", 64)?, "grad/w1 \"ü\"");
        Ok(())
    }

    #[test]
    fn every_field_survives_the_round_trip() {
        let bytes = sample();
        let mut r = reader(&bytes);
        read_sample(&mut r).unwrap();
        assert_eq!(r.remaining(), 0);
        r.end().unwrap();
    }

    #[test]
    fn a_message_cut_anywhere_names_the_field_it_ends_in() {
        let bytes = sample();
        for cut in 0..bytes.len() {
            let mut r = reader(&bytes[..cut]);
            let reason = reason(read_sample(&mut r).unwrap_err());
            // Cut right after the count, the items it announces cannot fit.
            assert!(
                reason.starts_with("test message: truncated: expected ")
                    || reason.starts_with("test message: 2 tensors cannot fit"),
                "cut at {cut}: {reason}"
            );
        }
        let cases = [
            (3, "truncated: expected 4 bytes for the magic, 3 left"),
            (4, "truncated: expected 1 byte for the kind, 0 left"),
            (8, "truncated: expected 4 bytes for the row index, 2 left"),
            (
                20,
                "truncated: expected 8 bytes for the clock offset, 2 left",
            ),
            (36, "truncated: expected 8 bytes for the root, 2 left"),
            (
                43,
                "truncated: expected 4 bytes for the number of tensors, 1 left",
            ),
            (47, "2 tensors cannot fit in the 1 byte left"),
            (
                48,
                "truncated: expected 4 bytes for the length of the value, 2 left",
            ),
            (51, "truncated: expected 3 bytes for the value, 1 left"),
            (
                58,
                "truncated: expected 12 bytes for the tensor name, 1 left",
            ),
        ];
        for (cut, expected) in cases {
            let mut r = reader(&bytes[..cut]);
            assert_eq!(
                reason(read_sample(&mut r).unwrap_err()),
                format!("test message: {expected}"),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn the_error_names_the_ranks_and_the_message() {
        let err = reader(&[1, 2, 3]).u64("clock offset").unwrap_err();
        assert_eq!(
            err.to_string(),
            "rank 2: protocol error from rank 5: test message: truncated: expected 8 bytes for the clock offset, 3 left"
        );
    }

    #[test]
    fn a_reporting_reader_fails_with_the_callers_error() {
        let mut r = Reader::reporting(&[], "request", Error::Store);
        let err = r.u8("request kind").unwrap_err();
        assert_eq!(
            err.to_string(),
            "store: request: truncated: expected 1 byte for the request kind, 0 left"
        );
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading_it() {
        let mut w = Writer::new();
        w.u32(u32::MAX);
        let bytes = w.into_bytes();
        assert_eq!(
            reason(reader(&bytes).bytes("key", 1024).unwrap_err()),
            "test message: the key is 4294967295 bytes long, more than the 1024 accepted"
        );
        assert_eq!(
            reason(reader(&bytes).string("key", 1024).unwrap_err()),
            "test message: the key is 4294967295 bytes long, more than the 1024 accepted"
        );
    }

    #[test]
    fn a_count_beyond_what_the_bytes_can_hold_is_refused() {
        let mut w = Writer::new();
        w.count(3).u64(1).u64(2);
        let bytes = w.into_bytes();
        assert_eq!(
            reason(reader(&bytes).count("dims", 8).unwrap_err()),
            "test message: 3 dims cannot fit in the 16 bytes left"
        );
        assert_eq!(reader(&bytes).count("dims", 5).unwrap(), 3);
        let mut w = Writer::new();
        w.u32(u32::MAX);
        let bytes = w.into_bytes();
        assert_eq!(
            reason(reader(&bytes).count("events", 1).unwrap_err()),
            "test message: 4294967295 events cannot fit in the 0 bytes left"
        );
    }

    #[test]
    fn trailing_bytes_are_refused() {
        assert_eq!(
            reason(reader(&[0]).end().unwrap_err()),
            "test message: 1 byte after the last field"
        );
        let mut r = reader(&[7, 0, 0]);
        r.u8("kind").unwrap();
        assert_eq!(
            reason(r.end().unwrap_err()),
            "test message: 2 bytes after the last field"
        );
    }

    #[test]
    fn malformed_values_are_named() {
        assert_eq!(
            reason(reader(&[2]).flag("clock flag").unwrap_err()),
            "test message: the clock flag is 2, not 0 or 1"
        );
        let mut w = Writer::new();
        w.bytes(&[0xff, 0xfe]);
        let bytes = w.into_bytes();
        assert_eq!(
            reason(reader(&bytes).string("key", 16).unwrap_err()),
            "test message: the key is not UTF-8: invalid utf-8 sequence of 1 bytes from index 0"
        );
        assert_eq!(
            reason(reader(&[]).malformed("bad row kind 9")),
            "test message: bad row kind 9"
        );
    }

    #[cfg(target_pointer_width = "32")]
    #[test]
    fn a_size_beyond_usize_is_refused() {
        let bytes = u64::MAX.to_le_bytes();
        assert_eq!(
            reason(reader(&bytes).usize("root").unwrap_err()),
            "test message: the root 18446744073709551615 does not fit a usize"
        );
    }

    /// Any field, for the property test.
    #[derive(Debug, Clone)]
    enum Field {
        U8(u8),
        Flag(bool),
        U32(u32),
        U64(u64),
        I64(i64),
        /// By its bits, so that NaNs compare.
        F64(u64),
        Bytes(Vec<u8>),
        Str(String),
    }

    fn field() -> impl proptest::strategy::Strategy<Value = Field> {
        use proptest::prelude::*;
        prop_oneof![
            any::<u8>().prop_map(Field::U8),
            any::<bool>().prop_map(Field::Flag),
            any::<u32>().prop_map(Field::U32),
            any::<u64>().prop_map(Field::U64),
            any::<i64>().prop_map(Field::I64),
            any::<u64>().prop_map(Field::F64),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Field::Bytes),
            ".{0,20}".prop_map(Field::Str),
        ]
    }

    fn write(fields: &[Field]) -> Vec<u8> {
        let mut w = Writer::new();
        for field in fields {
            match field {
                Field::U8(v) => w.u8(*v),
                Field::Flag(v) => w.flag(*v),
                Field::U32(v) => w.u32(*v),
                Field::U64(v) => w.u64(*v),
                Field::I64(v) => w.i64(*v),
                Field::F64(bits) => w.f64(f64::from_bits(*bits)),
                Field::Bytes(v) => w.bytes(v),
                Field::Str(v) => w.str(v),
            };
        }
        w.into_bytes()
    }

    /// Reads `fields` back, checking each value.
    fn read(bytes: &[u8], fields: &[Field]) -> Result<()> {
        let mut r = reader(bytes);
        for field in fields {
            let same = match field {
                Field::U8(v) => r.u8("u8")? == *v,
                Field::Flag(v) => r.flag("flag")? == *v,
                Field::U32(v) => r.u32("u32")? == *v,
                Field::U64(v) => r.u64("u64")? == *v,
                Field::I64(v) => r.i64("i64")? == *v,
                Field::F64(bits) => r.f64("f64")?.to_bits() == *bits,
                Field::Bytes(v) => r.bytes("bytes", 40)? == v.as_slice(),
                Field::Str(v) => r.string("string", 80)? == *v,
            };
            assert!(same, "{field:?} read back differently");
        }
        r.end()
    }

    proptest::proptest! {
        #[test]
        fn any_fields_round_trip_and_any_cut_is_refused(
            fields in proptest::collection::vec(field(), 0..8)
        ) {
            let bytes = write(&fields);
            read(&bytes, &fields).unwrap();
            for cut in 0..bytes.len() {
                let reason = reason(read(&bytes[..cut], &fields).unwrap_err());
                proptest::prop_assert!(reason.contains("truncated"), "{}", reason);
            }
        }
    }

    #[test]
    fn numbers_are_little_endian() {
        let mut w = Writer::new();
        w.u32(1).str("ab");
        assert_eq!(w.into_bytes(), [1, 0, 0, 0, 2, 0, 0, 0, b'a', b'b']);
    }
}
