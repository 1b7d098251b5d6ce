//! The compact byte form in which a rank's events travel to rank 0: little-endian integers
//! and length-prefixed UTF-8, each name sent once per batch. JSON is only built on rank 0,
//! so the other ranks pay for neither the text nor its size on the network.
//!
//! ```text
//! batch  = "HVT1" clock rows names events
//! clock  = u8 (0: none | 1: i64 offset_ns, u64 error_ns)
//! rows   = u32 count, { u8 kind (0: cycles | 1: tensor, then string) }
//! names  = u32 count, { string }
//! events = u32 count, { u8 phase, u64 ts_ns, u32 row, u32 name, args }
//! args   = u8 flags (1: dtype, 2: shape, 4: bytes), [u8 dtype code],
//!          [u32 rank, { u64 dim }], [u64 bytes]
//! string = u32 length, UTF-8 bytes
//! ```

use hvd_core::DType;
use hvd_core::trace::SpanArgs;

use crate::align::ClockOffset;
use crate::event::{Batch, Event, Phase, RowKey};

const MAGIC: &[u8; 4] = b"HVT1";

const HAS_DTYPE: u8 = 1;
const HAS_SHAPE: u8 = 2;
const HAS_BYTES: u8 = 4;

/// Serialises a batch.
pub(crate) fn encode(batch: &Batch) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + batch.events.len() * 24));
    w.0.extend_from_slice(MAGIC);
    match batch.clock {
        None => w.u8(0),
        Some(clock) => {
            w.u8(1);
            // Two's complement both ways: `decode` casts back to the same i64.
            w.u64(clock.offset_ns as u64);
            w.u64(clock.error_ns);
        }
    }
    w.len(batch.rows.len());
    for row in &batch.rows {
        match row {
            RowKey::Cycles => w.u8(0),
            RowKey::Tensor(name) => {
                w.u8(1);
                w.str(name);
            }
        }
    }
    w.len(batch.names.len());
    for name in &batch.names {
        w.str(name);
    }
    w.len(batch.events.len());
    for e in &batch.events {
        w.u8(e.phase.code());
        w.u64(e.ts_ns);
        w.u32(e.row);
        w.u32(e.name);
        w.args(&e.args);
    }
    w.0
}

/// Parses a batch, checking every index, so that rank 0 can render it without further
/// checks. The error says what was wrong and where.
pub(crate) fn decode(bytes: &[u8]) -> Result<Batch, String> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not a timeline batch (bad magic)".into());
    }
    let clock = match r.u8()? {
        0 => None,
        1 => Some(ClockOffset {
            offset_ns: r.u64()? as i64,
            error_ns: r.u64()?,
        }),
        other => return Err(format!("bad clock flag {other}")),
    };
    let mut rows = Vec::new();
    for _ in 0..r.count()? {
        rows.push(match r.u8()? {
            0 => RowKey::Cycles,
            1 => RowKey::Tensor(r.string()?),
            other => return Err(format!("bad row kind {other}")),
        });
    }
    let mut names = Vec::new();
    for _ in 0..r.count()? {
        names.push(r.string()?);
    }
    let mut events = Vec::new();
    for _ in 0..r.count()? {
        let code = r.u8()?;
        let phase = Phase::from_code(code).ok_or_else(|| format!("bad event phase {code}"))?;
        let ts_ns = r.u64()?;
        let (row, name) = (r.u32()?, r.u32()?);
        if row as usize >= rows.len() || name as usize >= names.len() {
            return Err(format!(
                "event refers to row {row} of {} or name {name} of {}",
                rows.len(),
                names.len()
            ));
        }
        let args = r.args()?;
        events.push(Event {
            phase,
            ts_ns,
            row,
            name,
            args,
        });
    }
    if r.at != bytes.len() {
        return Err(format!("{} bytes after the last event", bytes.len() - r.at));
    }
    Ok(Batch {
        clock,
        rows,
        names,
        events,
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// A count or length. Tables and names beyond 4 Gi entries or bytes cannot occur:
    /// rows and names are interned, and a batch holds one flush interval of events.
    fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }

    fn args(&mut self, args: &SpanArgs) {
        let flags = args.dtype.map_or(0, |_| HAS_DTYPE)
            | args.shape.as_ref().map_or(0, |_| HAS_SHAPE)
            | args.bytes.map_or(0, |_| HAS_BYTES);
        self.u8(flags);
        if let Some(dtype) = args.dtype {
            self.u8(dtype.code());
        }
        if let Some(shape) = &args.shape {
            self.len(shape.len());
            for dim in shape {
                self.u64(*dim as u64);
            }
        }
        if let Some(bytes) = args.bytes {
            self.u64(bytes as u64);
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "truncated: needed {n} bytes at offset {} of {}",
                self.at,
                self.bytes.len()
            ));
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn count(&mut self) -> Result<usize, String> {
        Ok(self.u32()? as usize)
    }

    fn usize(&mut self) -> Result<usize, String> {
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| format!("{v} does not fit this machine's usize"))
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.count()?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| format!("name is not UTF-8: {e}"))
    }

    fn args(&mut self) -> Result<SpanArgs, String> {
        let flags = self.u8()?;
        let mut args = SpanArgs::default();
        if flags & HAS_DTYPE != 0 {
            let code = self.u8()?;
            args.dtype = Some(DType::from_code(code).ok_or_else(|| format!("bad dtype {code}"))?);
        }
        if flags & HAS_SHAPE != 0 {
            let rank = self.count()?;
            // Capacity bounded by what the bytes can hold, so garbage cannot exhaust memory.
            let mut shape = Vec::with_capacity(rank.min(self.bytes.len() / 8));
            for _ in 0..rank {
                shape.push(self.usize()?);
            }
            args.shape = Some(shape);
        }
        if flags & HAS_BYTES != 0 {
            args.bytes = Some(self.usize()?);
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Batch {
        Batch {
            clock: Some(ClockOffset {
                offset_ns: -1_234,
                error_ns: 56,
            }),
            rows: vec![RowKey::Cycles, RowKey::Tensor("grad/w1 \"ü\"".into())],
            names: vec!["CYCLE_START".into(), "TCP_ALLREDUCE".into()],
            events: vec![
                Event {
                    phase: Phase::Instant,
                    ts_ns: 7,
                    row: 0,
                    name: 0,
                    args: SpanArgs::default(),
                },
                Event {
                    phase: Phase::Begin,
                    ts_ns: 9,
                    row: 1,
                    name: 1,
                    args: SpanArgs::of(DType::BF16, &[3, 5], 30),
                },
                Event {
                    phase: Phase::End,
                    ts_ns: u64::MAX,
                    row: 1,
                    name: 1,
                    args: SpanArgs::default(),
                },
            ],
        }
    }

    #[test]
    fn a_batch_survives_the_round_trip() {
        let batch = sample();
        assert_eq!(decode(&encode(&batch)), Ok(batch));
        assert_eq!(decode(&encode(&Batch::default())), Ok(Batch::default()));
    }

    #[test]
    fn truncated_or_corrupt_bytes_are_refused_with_the_reason() {
        let bytes = encode(&sample());
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut} was accepted");
        }
        assert_eq!(
            decode(b"JSON").unwrap_err(),
            "not a timeline batch (bad magic)"
        );
        let mut extra = bytes.clone();
        extra.push(0);
        assert_eq!(decode(&extra).unwrap_err(), "1 bytes after the last event");
    }

    #[test]
    fn an_event_pointing_outside_the_tables_is_refused() {
        let mut batch = sample();
        batch.events[1].row = 2;
        assert_eq!(
            decode(&encode(&batch)).unwrap_err(),
            "event refers to row 2 of 2 or name 1 of 2"
        );
    }
}
