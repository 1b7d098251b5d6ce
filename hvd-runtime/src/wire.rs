//! The binary encoding of what ranks announce to each other each cycle, written and read
//! with hvd-core's wire toolkit.
//!
//! ```text
//! announcement = "Hvd4" requests leaving stalled tune
//! requests     = count, { name dtype shape device op }
//! device       = u8 (0: cpu | 1: cuda), u64 ordinal
//! op           = u8 kind, then that kind's fields only
//! leaving      = flag, [string reason]
//! stalled      = count, { string name, u64 waited_ms, ranks }
//! tune         = flag, [usize fusion_threshold, u64 cycle_time_ns]
//! ```
//!
//! Decoding is defensive: every length is checked against the bytes that are left and
//! against a limit, so garbage gives an error naming the field instead of a panic or a
//! huge allocation.

use hvd_core::wire::{Reader, Writer};
use hvd_core::{Compression, DType, Device, OpKind as CollectiveKind, ReduceOp, Reduction, Result};

use super::request::{Op, OpKind, Request};
use crate::autotune::Params;

/// Tensor names longer than this are refused.
pub(crate) const MAX_NAME: usize = 4096;
/// Version 4: op kinds are coded as hvd-core codes them, the runtime's own after them.
/// (3: requests carry their op's own fields only, lengths are the toolkit's.)
const MAGIC: &[u8; 4] = b"Hvd4";
/// Bounds the leaving reason and stall names a peer can make this rank allocate.
const MAX_TEXT: usize = 1 << 16;

/// What one rank tells the others in a negotiation round.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Announcement {
    /// Requests this rank has not announced before.
    pub requests: Vec<Request>,
    /// Set when this rank is leaving the job, with the reason.
    pub leaving: Option<String>,
    /// Rank 0 only: tensors to fail everywhere because they stalled.
    pub stalled: Vec<StallVerdict>,
    /// Rank 0 only: the autotuner's new parameters, applied by every rank after this
    /// cycle.
    pub tune: Option<Params>,
}

/// Rank 0's decision that a tensor waited too long for some ranks.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct StallVerdict {
    pub name: String,
    pub waited_ms: u64,
    pub missing: Vec<usize>,
}

fn usizes(w: &mut Writer, values: &[usize]) {
    w.count(values.len());
    values.iter().for_each(|v| {
        w.usize(*v);
    });
}

fn read_usizes(r: &mut Reader<'_>, items: &str) -> Result<Vec<usize>> {
    let n = r.count(items, 8)?;
    (0..n).map(|_| r.usize(items)).collect()
}

fn encode_request(w: &mut Writer, r: &Request) {
    w.str(&r.name).u8(r.dtype.code());
    usizes(w, &r.shape);
    match r.device {
        Device::Cuda(ordinal) => w.u8(1).u64(ordinal as u64),
        _ => w.u8(0).u64(0),
    };
    encode_op(w, &r.op);
}

/// The op's kind, then the fields of that kind only.
fn encode_op(w: &mut Writer, op: &Op) {
    w.u8(op.kind().code());
    let reduction = |w: &mut Writer, r: &Reduction| {
        w.u8(r.op.code()).f64(r.prescale).f64(r.postscale);
    };
    match op {
        Op::Allreduce {
            reduction: r,
            compression,
        } => {
            reduction(w, r);
            w.u8(compression.code());
        }
        Op::Reducescatter { reduction: r } => reduction(w, r),
        Op::Broadcast { root } => {
            w.usize(*root);
        }
        Op::Alltoall { splits } => usizes(w, splits),
        Op::AddProcessSet { members } => usizes(w, members),
        Op::RemoveProcessSet { id } => {
            w.usize(*id);
        }
        Op::Allgather | Op::Barrier | Op::Join | Op::Adasum => {}
    }
}

fn decode_request(r: &mut Reader<'_>) -> Result<Request> {
    let name = r.string("tensor name", MAX_NAME)?;
    let dtype = DType::from_code(r.u8("dtype")?).ok_or_else(|| r.malformed("unknown dtype"))?;
    let shape = read_usizes(r, "dims of the shape")?;
    let device = match (r.u8("device kind")?, r.u64("device ordinal")?) {
        (0, _) => Device::Cpu,
        (1, ordinal) => Device::Cuda(
            u32::try_from(ordinal).map_err(|_| r.malformed("device ordinal out of range"))?,
        ),
        (kind, _) => return Err(r.malformed(format_args!("unknown device kind {kind}"))),
    };
    let op = decode_op(r)?;
    Ok(Request {
        name: name.into(),
        op,
        dtype,
        shape,
        device,
    })
}

fn decode_op(r: &mut Reader<'_>) -> Result<Op> {
    let code = r.u8("op")?;
    let kind =
        OpKind::from_code(code).ok_or_else(|| r.malformed(format_args!("unknown op {code}")))?;
    let reduction = |r: &mut Reader<'_>| -> Result<Reduction> {
        let code = r.u8("reduce op")?;
        let op = ReduceOp::from_code(code)
            .ok_or_else(|| r.malformed(format_args!("unknown reduce op {code}")))?;
        Ok(Reduction::new(op)
            .with_prescale(r.f64("prescale")?)
            .with_postscale(r.f64("postscale")?))
    };
    Ok(match kind {
        OpKind::Collective(CollectiveKind::Allreduce) => Op::Allreduce {
            reduction: reduction(r)?,
            compression: Compression::from_code(r.u8("compression")?)
                .ok_or_else(|| r.malformed("unknown compression"))?,
        },
        OpKind::Collective(CollectiveKind::Reducescatter) => Op::Reducescatter {
            reduction: reduction(r)?,
        },
        OpKind::Collective(CollectiveKind::Broadcast) => Op::Broadcast {
            root: r.usize("root")?,
        },
        OpKind::Collective(CollectiveKind::Alltoall) => Op::Alltoall {
            splits: read_usizes(r, "splits")?,
        },
        OpKind::AddProcessSet => Op::AddProcessSet {
            members: read_usizes(r, "members")?,
        },
        OpKind::RemoveProcessSet => Op::RemoveProcessSet {
            id: r.usize("process set id")?,
        },
        OpKind::Collective(CollectiveKind::Allgather) => Op::Allgather,
        OpKind::Collective(CollectiveKind::Barrier) => Op::Barrier,
        OpKind::Join => Op::Join,
        OpKind::Adasum => Op::Adasum,
    })
}

impl Announcement {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.raw(MAGIC).count(self.requests.len());
        self.requests.iter().for_each(|r| encode_request(&mut w, r));
        w.flag(self.leaving.is_some());
        if let Some(reason) = &self.leaving {
            w.str(reason);
        }
        w.count(self.stalled.len());
        for verdict in &self.stalled {
            w.str(&verdict.name).u64(verdict.waited_ms);
            usizes(&mut w, &verdict.missing);
        }
        w.flag(self.tune.is_some());
        if let Some(p) = &self.tune {
            w.usize(p.fusion_threshold)
                .u64(p.cycle_time.as_nanos() as u64);
        }
        w.into_bytes()
    }

    /// Decodes what rank `from` sent to rank `me`.
    pub fn decode(bytes: &[u8], from: usize, me: usize) -> Result<Announcement> {
        if bytes.is_empty() {
            return Ok(Announcement::default());
        }
        let peer = format!("rank {from}");
        let mut r = Reader::new(bytes, "negotiation message", me, &peer);
        if r.raw("magic", MAGIC.len())? != MAGIC {
            return Err(r.malformed("wrong magic (not an hvd negotiation message of this version)"));
        }
        // The smallest request (name and shape lengths, dtype, device, an op without
        // fields) bounds the count by the message size.
        let n = r.count("requests", 4 + 1 + 4 + 1 + 8 + 1)?;
        let requests = (0..n)
            .map(|_| decode_request(&mut r))
            .collect::<Result<_>>()?;
        let leaving = match r.flag("leaving flag")? {
            false => None,
            true => Some(r.string("leaving reason", MAX_TEXT)?),
        };
        let m = r.count("stalled tensors", 4 + 8 + 4)?;
        let stalled = (0..m)
            .map(|_| {
                Ok(StallVerdict {
                    name: r.string("stalled tensor name", MAX_NAME)?,
                    waited_ms: r.u64("stalled time")?,
                    missing: read_usizes(&mut r, "missing ranks")?,
                })
            })
            .collect::<Result<_>>()?;
        let tune = match r.flag("tune flag")? {
            false => None,
            true => Some(Params {
                fusion_threshold: r.usize("fusion threshold")?,
                cycle_time: std::time::Duration::from_nanos(r.u64("cycle time")?),
            }),
        };
        r.end()?;
        Ok(Announcement {
            requests,
            leaving,
            stalled,
            tune,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op() -> impl Strategy<Value = Op> {
        (
            proptest::sample::select(OpKind::all().collect::<Vec<_>>()),
            0..ReduceOp::ALL.len(),
            any::<f64>(),
            0..Compression::ALL.len(),
            0usize..64,
            proptest::collection::vec(0usize..100, 0..5),
        )
            .prop_map(|(k, o, scale, c, root, list)| {
                let reduction = Reduction::new(ReduceOp::ALL[o])
                    .with_prescale(scale)
                    .with_postscale(0.5);
                match k {
                    OpKind::Collective(CollectiveKind::Allreduce) => Op::Allreduce {
                        reduction,
                        compression: Compression::ALL[c],
                    },
                    OpKind::Collective(CollectiveKind::Reducescatter) => {
                        Op::Reducescatter { reduction }
                    }
                    OpKind::Collective(CollectiveKind::Broadcast) => Op::Broadcast { root },
                    OpKind::Collective(CollectiveKind::Alltoall) => Op::Alltoall { splits: list },
                    OpKind::AddProcessSet => Op::AddProcessSet { members: list },
                    OpKind::RemoveProcessSet => Op::RemoveProcessSet { id: root },
                    OpKind::Collective(CollectiveKind::Allgather) => Op::Allgather,
                    OpKind::Collective(CollectiveKind::Barrier) => Op::Barrier,
                    OpKind::Join => Op::Join,
                    OpKind::Adasum => Op::Adasum,
                }
            })
    }

    fn request() -> impl Strategy<Value = Request> {
        (
            "[a-z./0-9]{0,20}",
            op(),
            0..DType::ALL.len(),
            proptest::collection::vec(0usize..1000, 0..4),
            proptest::option::of(0u32..8),
        )
            .prop_map(|(name, op, d, shape, cuda)| Request {
                name: name.into(),
                op,
                dtype: DType::ALL[d],
                shape,
                device: cuda.map_or(Device::Cpu, Device::Cuda),
            })
    }

    proptest! {
        #[test]
        fn announcements_round_trip(
            requests in proptest::collection::vec(request(), 0..5),
            leaving in proptest::option::of("[ -~]{0,30}"),
            stalled in proptest::collection::vec(("[a-z]{1,8}", any::<u64>(), proptest::collection::vec(0usize..9, 0..3)), 0..3),
        ) {
            let stalled = stalled
                .into_iter()
                .map(|(name, waited_ms, missing)| StallVerdict { name, waited_ms, missing })
                .collect();
            let tune = Some(Params { fusion_threshold: 1 << 20, cycle_time: std::time::Duration::from_micros(2500) });
            let a = Announcement { requests, leaving, stalled, tune };
            let decoded = Announcement::decode(&a.encode(), 1, 0).unwrap();
            // NaN scale factors compare unequal; compare the encodings instead.
            prop_assert_eq!(decoded.encode(), a.encode());
        }

        #[test]
        fn garbage_is_an_error_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 1..300)) {
            let decoded = Announcement::decode(&bytes, 3, 0);
            // Bytes that happen to start with the magic number may decode.
            if !bytes.starts_with(MAGIC) {
                let error = decoded.unwrap_err().to_string();
                prop_assert!(error.contains("negotiation message") && error.contains("rank 3"), "{}", error);
            }
        }

        /// Past the magic number too: a valid message with one byte changed decodes to
        /// something or fails, and never panics or allocates without bound.
        #[test]
        fn a_corrupted_message_never_panics(
            requests in proptest::collection::vec(request(), 1..3),
            at in any::<proptest::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut bytes = Announcement { requests, ..Default::default() }.encode();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            let _ = Announcement::decode(&bytes, 3, 0);
        }

        #[test]
        fn truncations_are_errors(requests in proptest::collection::vec(request(), 1..3), cut in 1usize..40) {
            let bytes = Announcement { requests, ..Default::default() }.encode();
            let cut = cut.min(bytes.len() - 1);
            prop_assert!(Announcement::decode(&bytes[..bytes.len() - cut], 2, 0).is_err());
        }
    }

    #[test]
    fn a_flag_byte_other_than_0_or_1_is_named() {
        let mut bytes = Announcement::default().encode();
        bytes[8] = 2; // after the magic and the request count: the leaving flag
        assert_eq!(
            Announcement::decode(&bytes, 2, 0).unwrap_err().to_string(),
            "rank 0: protocol error from rank 2: negotiation message: the leaving flag is 2, not 0 or 1"
        );
    }

    #[test]
    fn a_huge_count_does_not_allocate_and_names_the_sender() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        let err = Announcement::decode(&bytes, 5, 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rank 1: protocol error from rank 5: negotiation message: 4294967295 requests cannot fit in the 0 bytes left"
        );
    }
}
