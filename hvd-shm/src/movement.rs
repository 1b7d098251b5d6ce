//! Operations that move data without reducing it, one slot's worth per step.

use hvd_core::{Error, Result};

use crate::allreduce::Part;
use crate::config::MIN_SLOT_BYTES;
use crate::copy::copy;
use crate::layout::MAX_RANKS;
use crate::lockstep::{Desc, Lockstep};
use crate::op::{Call, Op};
use hvd_core::schedule::blocks;

use crate::plan;

/// Copies the batch from `root`: step `c` carries bytes `c * slot ..` of the tensors laid
/// end to end.
pub(crate) fn broadcast(
    steps: &mut Lockstep,
    tensor: &str,
    parts: &mut [Part<'_>],
    root: usize,
) -> Result<()> {
    let call = Call {
        op: Op::Broadcast,
        tensor,
    };
    let lens: Vec<usize> = parts.iter().map(|p| p.bytes.len()).collect();
    let total: usize = lens.iter().sum();
    let slot_bytes = steps.slot_bytes();
    let rank = steps.rank();
    let desc = Desc {
        code: Op::Broadcast.code(root),
        ..Desc::new(Op::Broadcast, total)
    };
    for c in 0..total.div_ceil(slot_bytes) {
        let spans = plan::spans(&lens, plan::piece(total, slot_bytes, c));
        if rank == root {
            let slot = steps.slot_mut();
            for span in &spans {
                copy(
                    &mut slot[span.window_range.clone()],
                    &parts[span.tensor].bytes[span.tensor_range.clone()],
                );
            }
        }
        steps.sync(&call, desc)?;
        if rank != root {
            for span in spans {
                copy(
                    &mut parts[span.tensor].bytes[span.tensor_range],
                    &steps.slot(root)[span.window_range],
                );
            }
        }
    }
    Ok(())
}

/// Concatenates every rank's `input` into `output`: step `c` carries bytes `c * slot ..`
/// of every rank's input.
pub(crate) fn allgather(
    steps: &mut Lockstep,
    tensor: &str,
    input: &[u8],
    output: &mut [u8],
    counts: &[usize],
    element: usize,
) -> Result<()> {
    let call = Call {
        op: Op::Allgather,
        tensor,
    };
    let (rank, slot_bytes) = (steps.rank(), steps.slot_bytes());
    let blocks = blocks(0, counts, element);
    copy(&mut output[blocks[rank].clone()], input);
    let longest = blocks.iter().map(|b| b.len()).max().unwrap_or(0);
    for c in 0..longest.div_ceil(slot_bytes) {
        let mine = plan::piece(input.len(), slot_bytes, c);
        copy(&mut steps.slot_mut()[..mine.len()], &input[mine]);
        steps.sync(&call, Desc::new(call.op, output.len()))?;
        for (peer, block) in blocks.iter().enumerate().filter(|(p, _)| *p != rank) {
            let piece = plan::piece(block.len(), slot_bytes, c);
            let len = piece.len();
            copy(
                &mut output[block.start + piece.start..block.start + piece.end],
                &steps.slot(peer)[..len],
            );
        }
    }
    Ok(())
}

// Two sizes of 8 bytes for each rank fit the smallest slot at the most ranks.
const _: () = assert!(16 * MAX_RANKS <= MIN_SLOT_BYTES);

/// Checks the splits every rank put in its slot: the first pair, in rank order, where one
/// rank sends other than the other expects. Every rank checks all of them alike, so all
/// return the same error at the same step and the group stays in step.
fn agreed_splits(steps: &Lockstep, tensor: &str) -> Result<()> {
    let size = steps.size();
    let read = |peer: usize, i: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&steps.slot(peer)[i * 8..i * 8 + 8]);
        u64::from_le_bytes(bytes)
    };
    for from in 0..size {
        for to in (0..size).filter(|to| *to != from) {
            let (sent, room) = (read(from, to), read(to, size + from));
            if sent != room {
                return Err(Error::Mismatch {
                    property: "alltoall splits",
                    tensor: tensor.into(),
                    rank_a: from,
                    value_a: format!("{sent} bytes for rank {to}"),
                    rank_b: to,
                    value_b: format!("room for {room} bytes from rank {from}"),
                });
            }
        }
    }
    Ok(())
}

/// Sends block `r` of `input` to rank `r` and receives block `r` of `output` from it:
/// a first step agrees on the longest block; then step `c` carries bytes
/// `c * region ..` of every block, block `r` in region `r` of the sender's slot.
pub(crate) fn alltoall(
    steps: &mut Lockstep,
    tensor: &str,
    input: &[u8],
    send: &[std::ops::Range<usize>],
    output: &mut [u8],
    receive: &[std::ops::Range<usize>],
) -> Result<()> {
    let call = Call {
        op: Op::Alltoall,
        tensor,
    };
    let (rank, size, region) = (steps.rank(), steps.size(), steps.region_bytes());
    copy(
        &mut output[receive[rank].clone()],
        &input[send[rank].clone()],
    );
    let longest_sent = send.iter().map(|b| b.len()).max().unwrap_or(0);
    // Every block's size, sent and expected, goes in the first step's slot, so that a
    // rank expecting other than what is sent to it is an error on every rank rather than
    // bytes cut or stale.
    let slot = steps.slot_mut();
    for (i, block) in send.iter().chain(receive).enumerate() {
        slot[i * 8..i * 8 + 8].copy_from_slice(&(block.len() as u64).to_le_bytes());
    }
    steps.sync(
        &call,
        Desc {
            value: longest_sent as u64,
            ..Desc::new(call.op, 0)
        },
    )?;
    agreed_splits(steps, tensor)?;
    let longest = (0..size).map(|p| steps.value(p)).max().unwrap_or(0);
    let count = usize::try_from(longest.div_ceil(region as u64)).unwrap_or(usize::MAX);
    for c in 0..count {
        let slot = steps.slot_mut();
        for (peer, block) in send.iter().enumerate().filter(|(p, _)| *p != rank) {
            let piece = plan::piece(block.len(), region, c);
            let at = peer * region;
            copy(
                &mut slot[at..at + piece.len()],
                &input[block.start + piece.start..block.start + piece.end],
            );
        }
        steps.sync(&call, Desc::new(call.op, 0))?;
        for (peer, block) in receive.iter().enumerate().filter(|(p, _)| *p != rank) {
            let piece = plan::piece(block.len(), region, c);
            let at = rank * region;
            copy(
                &mut output[block.start + piece.start..block.start + piece.end],
                &steps.slot(peer)[at..at + piece.len()],
            );
        }
    }
    Ok(())
}
