//! The compact byte form in which a rank's events travel to rank 0, written with
//! [`hvd_core::wire`]: little-endian integers and length-prefixed UTF-8, each name sent
//! once per batch. JSON is only built on rank 0, so the other ranks pay for neither the
//! text nor its size on the network.
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

use hvd_core::trace::SpanArgs;
use hvd_core::wire::{Reader, Writer};
use hvd_core::{DType, Result};

use crate::align::ClockOffset;
use crate::event::{Batch, Event, Phase, RowKey};

const MAGIC: &[u8; 4] = b"HVT1";

const HAS_DTYPE: u8 = 1;
const HAS_SHAPE: u8 = 2;
const HAS_BYTES: u8 = 4;

/// Longest row or event name accepted: far beyond the tensor names the runtime allows
/// (4 KiB), yet bounded.
const MAX_NAME: usize = 1 << 20;

/// The fewest bytes an event takes: phase, timestamp, row, name and argument flags.
const MIN_EVENT_BYTES: usize = 1 + 8 + 4 + 4 + 1;

/// Serialises a batch.
pub(crate) fn encode(batch: &Batch) -> Vec<u8> {
    let mut w = Writer::with_capacity(64 + batch.events.len() * 24);
    w.raw(MAGIC);
    match batch.clock {
        None => w.u8(0),
        Some(clock) => w.u8(1).i64(clock.offset_ns).u64(clock.error_ns),
    };
    w.count(batch.rows.len());
    for row in &batch.rows {
        match row {
            RowKey::Cycles => w.u8(0),
            RowKey::Tensor(name) => w.u8(1).str(name),
        };
    }
    w.count(batch.names.len());
    for name in &batch.names {
        w.str(name);
    }
    w.count(batch.events.len());
    for e in &batch.events {
        w.u8(e.phase.code()).u64(e.ts_ns).u32(e.row).u32(e.name);
        write_args(&mut w, &e.args);
    }
    w.into_bytes()
}

/// Parses a batch that `peer` sent to rank `rank`, checking every index, so that rank 0
/// can render it without further checks. The error says what was wrong and where.
pub(crate) fn decode(bytes: &[u8], rank: usize, peer: &str) -> Result<Batch> {
    let mut r = Reader::new(bytes, "timeline events", rank, peer);
    if r.raw("magic", MAGIC.len())? != MAGIC {
        return Err(r.malformed("not a timeline batch (bad magic)"));
    }
    let clock = match r.u8("clock flag")? {
        0 => None,
        1 => Some(ClockOffset {
            offset_ns: r.i64("clock offset")?,
            error_ns: r.u64("clock error")?,
        }),
        other => return Err(r.malformed(format_args!("bad clock flag {other}"))),
    };
    let n = r.count("rows", 1)?;
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        rows.push(match r.u8("row kind")? {
            0 => RowKey::Cycles,
            1 => RowKey::Tensor(r.string("row's tensor name", MAX_NAME)?),
            other => return Err(r.malformed(format_args!("bad row kind {other}"))),
        });
    }
    let n = r.count("names", 4)?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        names.push(r.string("event name", MAX_NAME)?);
    }
    let n = r.count("events", MIN_EVENT_BYTES)?;
    let mut events = Vec::with_capacity(n);
    for _ in 0..n {
        let code = r.u8("event phase")?;
        let phase = Phase::from_code(code)
            .ok_or_else(|| r.malformed(format_args!("bad event phase {code}")))?;
        let ts_ns = r.u64("event timestamp")?;
        let (row, name) = (r.u32("event row")?, r.u32("event name index")?);
        if row as usize >= rows.len() || name as usize >= names.len() {
            return Err(r.malformed(format_args!(
                "event refers to row {row} of {} or name {name} of {}",
                rows.len(),
                names.len()
            )));
        }
        let args = read_args(&mut r)?;
        events.push(Event {
            phase,
            ts_ns,
            row,
            name,
            args,
        });
    }
    r.end()?;
    Ok(Batch {
        clock,
        rows,
        names,
        events,
    })
}

fn write_args(w: &mut Writer, args: &SpanArgs) {
    let flags = args.dtype.map_or(0, |_| HAS_DTYPE)
        | args.shape.as_ref().map_or(0, |_| HAS_SHAPE)
        | args.bytes.map_or(0, |_| HAS_BYTES);
    w.u8(flags);
    if let Some(dtype) = args.dtype {
        w.u8(dtype.code());
    }
    if let Some(shape) = &args.shape {
        w.count(shape.len());
        for dim in shape {
            w.usize(*dim);
        }
    }
    if let Some(bytes) = args.bytes {
        w.usize(bytes);
    }
}

fn read_args(r: &mut Reader<'_>) -> Result<SpanArgs> {
    let flags = r.u8("argument flags")?;
    let mut args = SpanArgs::default();
    if flags & HAS_DTYPE != 0 {
        let code = r.u8("dtype")?;
        let dtype =
            DType::from_code(code).ok_or_else(|| r.malformed(format_args!("bad dtype {code}")))?;
        args.dtype = Some(dtype);
    }
    if flags & HAS_SHAPE != 0 {
        let dims = r.count("shape dimensions", 8)?;
        let shape = (0..dims)
            .map(|_| r.usize("shape dimension"))
            .collect::<Result<_>>()?;
        args.shape = Some(shape);
    }
    if flags & HAS_BYTES != 0 {
        args.bytes = Some(r.usize("byte size")?);
    }
    Ok(args)
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

    /// Decodes as rank 0 does what rank 1 sent.
    fn decode(bytes: &[u8]) -> Result<Batch> {
        super::decode(bytes, 0, "rank 1")
    }

    /// The reason of a protocol error from rank 1 to rank 0.
    fn reason(bytes: &[u8]) -> String {
        match decode(bytes).unwrap_err() {
            hvd_core::Error::Protocol {
                rank: 0,
                peer,
                reason,
            } if peer == "rank 1" => reason,
            other => panic!("not rank 1's protocol error: {other}"),
        }
    }

    #[test]
    fn a_batch_survives_the_round_trip() {
        let batch = sample();
        assert_eq!(decode(&encode(&batch)).unwrap(), batch);
        assert_eq!(
            decode(&encode(&Batch::default())).unwrap(),
            Batch::default()
        );
    }

    #[test]
    fn truncated_or_corrupt_bytes_are_refused_with_the_reason() {
        let bytes = encode(&sample());
        for cut in 0..bytes.len() {
            let reason = reason(&bytes[..cut]);
            assert!(
                reason.starts_with("timeline events: truncated: expected ")
                    || reason.contains("cannot fit in the"),
                "cut at {cut}: {reason}"
            );
        }
        assert_eq!(
            reason(&bytes[..12]),
            "timeline events: truncated: expected 8 bytes for the clock offset, 7 left"
        );
        assert_eq!(
            reason(b"JSON"),
            "timeline events: not a timeline batch (bad magic)"
        );
        let mut extra = bytes.clone();
        extra.push(0);
        assert_eq!(
            reason(&extra),
            "timeline events: 1 byte after the last field"
        );
        let mut bad_phase = encode(&Batch {
            events: vec![sample().events[0].clone()],
            ..sample()
        });
        let at = bad_phase.len() - MIN_EVENT_BYTES;
        bad_phase[at] = 9;
        assert_eq!(reason(&bad_phase), "timeline events: bad event phase 9");
    }

    #[test]
    fn an_event_pointing_outside_the_tables_is_refused() {
        let mut batch = sample();
        batch.events[1].row = 2;
        assert_eq!(
            decode(&encode(&batch)).unwrap_err().to_string(),
            "rank 0: protocol error from rank 1: timeline events: event refers to row 2 of 2 or name 1 of 2"
        );
    }
}
