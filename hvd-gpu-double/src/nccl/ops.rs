//! Collectives as the stream runs them: the ranks first agree on the call (each one's
//! signature against every other's), then move data through their slots in rounds of
//! write, barrier, read, barrier.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::comm::{Member, Wire, stop_failure};
use super::reduce::{self, Dtype, RedOp};
use super::segment::{SIG, SLOT, Segment, Stop, wait_for_all};
use super::{Failure, INVALID_USAGE, REMOTE_ERROR, UNHANDLED_CUDA_ERROR};
use crate::fault::Stall;
use crate::inject;
use crate::memory;

/// One NCCL call of a group.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    AllReduce {
        send: u64,
        recv: u64,
        count: usize,
        dtype: Dtype,
        op: RedOp,
    },
    Broadcast {
        send: u64,
        recv: u64,
        count: usize,
        dtype: Dtype,
        root: usize,
    },
    Reduce {
        send: u64,
        recv: u64,
        count: usize,
        dtype: Dtype,
        op: RedOp,
        root: usize,
    },
    AllGather {
        send: u64,
        recv: u64,
        count: usize,
        dtype: Dtype,
    },
    ReduceScatter {
        send: u64,
        recv: u64,
        count: usize,
        dtype: Dtype,
        op: RedOp,
    },
    Send {
        buf: u64,
        count: usize,
        dtype: Dtype,
        peer: usize,
    },
    Recv {
        buf: u64,
        count: usize,
        dtype: Dtype,
        peer: usize,
    },
}

impl Op {
    fn is_p2p(&self) -> bool {
        matches!(self, Op::Send { .. } | Op::Recv { .. })
    }
}

/// What ranks compare: everything but the buffers (and a pre-multiplier's scalar).
fn signature(ops: &[Op]) -> Vec<u8> {
    let mut sig = Vec::new();
    for op in ops {
        let (kind, count, dtype, red, root, peer) = match *op {
            Op::AllReduce {
                count, dtype, op, ..
            } => (1u8, count, dtype, op.code(), 0, 0),
            Op::Broadcast {
                count, dtype, root, ..
            } => (2, count, dtype, 0, root, 0),
            Op::Reduce {
                count,
                dtype,
                op,
                root,
                ..
            } => (3, count, dtype, op.code(), root, 0),
            Op::AllGather { count, dtype, .. } => (4, count, dtype, 0, 0, 0),
            Op::ReduceScatter {
                count, dtype, op, ..
            } => (5, count, dtype, op.code(), 0, 0),
            Op::Send {
                count, dtype, peer, ..
            } => (6, count, dtype, 0, 0, peer),
            Op::Recv {
                count, dtype, peer, ..
            } => (7, count, dtype, 0, 0, peer),
        };
        sig.extend([kind, dtype.code(), red]);
        sig.extend((root as u32).to_le_bytes());
        sig.extend((peer as u32).to_le_bytes());
        sig.extend((count as u64).to_le_bytes());
    }
    sig
}

const ENTRY: usize = 19;

/// One decoded signature entry: kind, dtype, reduction, root, peer, count.
type Entry = (u8, u8, u8, u32, u32, u64);

fn entries(sig: &[u8]) -> Vec<Entry> {
    sig.chunks_exact(ENTRY)
        .map(|e| {
            (
                e[0],
                e[1],
                e[2],
                u32::from_le_bytes([e[3], e[4], e[5], e[6]]),
                u32::from_le_bytes([e[7], e[8], e[9], e[10]]),
                u64::from_le_bytes(e[11..19].try_into().unwrap_or_default()),
            )
        })
        .collect()
}

fn describe(e: &Entry) -> String {
    let (kind, dtype, red, root, peer, count) = *e;
    let dtype = Dtype::from_nccl(i32::from(dtype)).map_or("?", Dtype::name);
    let red = RedOp::name(red);
    match kind {
        1 => format!("ncclAllReduce(count {count}, {dtype}, {red})"),
        2 => format!("ncclBroadcast(count {count}, {dtype}, root {root})"),
        3 => format!("ncclReduce(count {count}, {dtype}, {red}, root {root})"),
        4 => format!("ncclAllGather(count {count}, {dtype})"),
        5 => format!("ncclReduceScatter(count {count}, {dtype}, {red})"),
        6 => format!("ncclSend(count {count}, {dtype}, peer {peer})"),
        _ => format!("ncclRecv(count {count}, {dtype}, peer {peer})"),
    }
}

fn describe_all(sig: &[u8]) -> String {
    let parts: Vec<String> = entries(sig).iter().map(describe).collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
}

/// Checks that the ranks' signatures fit together: collectives identical everywhere,
/// and for send/recv each pair's sends matching the receives in order and size.
fn check(sigs: &[Vec<u8>], call: u64) -> Result<(), String> {
    let p2p = |sig: &[u8]| entries(sig).first().is_some_and(|e| e.0 >= 6);
    for (rank, sig) in sigs.iter().enumerate().skip(1) {
        if p2p(sig) != p2p(&sigs[0]) || (!p2p(sig) && *sig != sigs[0]) {
            return Err(format!(
                "ranks disagree on call {call}: rank 0 called {}, rank {rank} called {}",
                describe_all(&sigs[0]),
                describe_all(sig)
            ));
        }
    }
    if !p2p(&sigs[0]) {
        return Ok(());
    }
    for (a, sig_a) in sigs.iter().enumerate() {
        for (b, sig_b) in sigs.iter().enumerate() {
            let sends: Vec<(u8, u64)> = entries(sig_a)
                .iter()
                .filter(|e| e.0 == 6 && e.4 as usize == b)
                .map(|e| (e.1, e.5))
                .collect();
            let receives: Vec<(u8, u64)> = entries(sig_b)
                .iter()
                .filter(|e| e.0 == 7 && e.4 as usize == a)
                .map(|e| (e.1, e.5))
                .collect();
            if sends != receives {
                return Err(format!(
                    "send/recv mismatch in call {call}: rank {a} sends rank {b} {sends:?} \
                     (datatype, count) but rank {b} receives {receives:?} from rank {a}"
                ));
            }
        }
    }
    Ok(())
}

/// The group's calls in the units the ranks agree on one at a time: each collective
/// alone, consecutive sends and receives together.
fn units(ops: &[Op]) -> Vec<&[Op]> {
    let mut units = Vec::new();
    let mut start = 0;
    while start < ops.len() {
        let mut end = start + 1;
        if ops[start].is_p2p() {
            while end < ops.len() && ops[end].is_p2p() {
                end += 1;
            }
        }
        units.push(&ops[start..end]);
        start = end;
    }
    units
}

/// The rank's view of the segment while it runs a unit.
struct Run<'a> {
    member: &'a Member,
    segment: &'a Segment,
    wire: &'a mut Wire,
}

impl Run<'_> {
    fn barrier(&mut self) -> Result<(), Stop> {
        self.wire.barriers = self.wire.barriers.wrapping_add(1);
        let mark = self.wire.barriers;
        let me = self.segment.control(self.member.rank());
        me.arrive.store(mark, Ordering::Release);
        wait_for_all(
            self.segment,
            self.member.rank(),
            &self.member.aborted,
            |c| c.arrive.load(Ordering::Acquire).wrapping_sub(mark) as i32 >= 0,
        )
    }

    /// Publishes this rank's signature and reads everyone's.
    fn agree(&mut self, sig: &[u8]) -> Result<Vec<Vec<u8>>, Stop> {
        let parity = (self.wire.calls % 2) as usize;
        let me = self.member.rank();
        let len = sig.len().min(SIG);
        // SAFETY: this rank's own signature area of this parity, which no one reads
        // until the barrier below; `len` fits in it.
        unsafe { std::ptr::copy_nonoverlapping(sig.as_ptr(), self.segment.sig(me, parity), len) };
        self.segment.control(me).sig_len[parity].store(len as u32, Ordering::Release);
        self.barrier()?;
        Ok((0..self.member.size())
            .map(|r| {
                let n = self.segment.control(r).sig_len[parity].load(Ordering::Acquire) as usize;
                // SAFETY: rank r wrote `n` bytes before the barrier and writes this
                // parity again only after the next call's barrier.
                unsafe { std::slice::from_raw_parts(self.segment.sig(r, parity), n.min(SIG)) }
                    .to_vec()
            })
            .collect())
    }

    /// The first `len` bytes of rank `rank`'s slot, to read.
    fn slot(&self, rank: usize, len: usize) -> &[u8] {
        // SAFETY: ranks read slots only between the barrier after the owners wrote them
        // and the barrier before they write them again.
        unsafe { std::slice::from_raw_parts(self.segment.slot(rank), len.min(SLOT)) }
    }

    /// The first `len` bytes of this rank's own slot, to write.
    fn own_slot(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: only this rank writes its slot, between the barrier after everyone
        // read it and the barrier that publishes it.
        unsafe {
            std::slice::from_raw_parts_mut(self.segment.slot(self.member.rank()), len.min(SLOT))
        }
    }
}

/// Device memory of this process, or the asynchronous error a kernel touching an
/// unallocated address would raise.
fn device<'m>(ptr: u64, len: usize) -> Result<&'m mut [u8], Failure> {
    // SAFETY: the stream owns the buffers of the collective it runs.
    unsafe { memory::bytes(ptr, len) }.ok_or_else(|| {
        Failure::new(
            UNHANDLED_CUDA_ERROR,
            format!("illegal memory access at {ptr:#x} ({len} bytes): freed while the collective was queued?"),
        )
    })
}

enum Ended {
    Stop(Stop),
    Failed(Failure),
}

impl From<Stop> for Ended {
    fn from(stop: Stop) -> Ended {
        Ended::Stop(stop)
    }
}

impl From<Failure> for Ended {
    fn from(failure: Failure) -> Ended {
        Ended::Failed(failure)
    }
}

/// Runs a group's calls for `member` on its stream.
pub(crate) fn run(member: &Member, ops: &[Op]) {
    let mut wire = member.wire.lock().unwrap_or_else(|e| e.into_inner());
    let Some(segment) = member.segment() else {
        return;
    };
    for unit in units(ops) {
        if member.aborted.load(Ordering::Acquire) || member.has_failed() {
            return;
        }
        if let Some(stall) = inject::stall(member.rank()) {
            if stall == Stall::RemoteError {
                member.fail(Failure::new(
                    REMOTE_ERROR,
                    "injected fault: remote process exited or there was a network error",
                ));
            }
            // As NCCL's kernels: stuck until the communicator is aborted.
            while !member.aborted.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(5));
            }
            return;
        }
        wire.calls += 1;
        let call = wire.calls;
        let mut run = Run {
            member,
            segment,
            wire: &mut wire,
        };
        let outcome = run_unit(&mut run, unit, call);
        match outcome {
            Ok(()) => {}
            Err(Ended::Stop(Stop::Aborted)) => return,
            Err(Ended::Stop(stop)) => {
                member.fail(stop_failure(stop, &format!("call {call}")));
                return;
            }
            Err(Ended::Failed(failure)) => {
                member.fail(failure);
                return;
            }
        }
    }
}

fn run_unit(run: &mut Run<'_>, unit: &[Op], call: u64) -> Result<(), Ended> {
    let sigs = run.agree(&signature(unit))?;
    check(&sigs, call).map_err(|message| Failure::new(INVALID_USAGE, message))?;
    match unit {
        [
            Op::AllReduce {
                send,
                recv,
                count,
                dtype,
                op,
            },
        ] => reduce_rounds(run, *send, *recv, *count, *dtype, *op, None),
        [
            Op::Reduce {
                send,
                recv,
                count,
                dtype,
                op,
                root,
            },
        ] => reduce_rounds(run, *send, *recv, *count, *dtype, *op, Some(*root)),
        [
            Op::Broadcast {
                send,
                recv,
                count,
                dtype,
                root,
            },
        ] => broadcast(run, *send, *recv, *count * dtype.size(), *root),
        [
            Op::AllGather {
                send,
                recv,
                count,
                dtype,
            },
        ] => allgather(run, *send, *recv, *count * dtype.size()),
        [
            Op::ReduceScatter {
                send,
                recv,
                count,
                dtype,
                op,
            },
        ] => reducescatter(run, *send, *recv, *count, *dtype, *op),
        p2p => exchange(run, p2p, &sigs),
    }
}

/// Allreduce (`root` None) or reduce to `root`, one slot's worth per round.
fn reduce_rounds(
    run: &mut Run<'_>,
    send: u64,
    recv: u64,
    count: usize,
    dtype: Dtype,
    op: RedOp,
    root: Option<usize>,
) -> Result<(), Ended> {
    let (me, size, width) = (run.member.rank(), run.member.size(), dtype.size());
    let per_round = SLOT / width;
    let mut start = 0;
    while start < count {
        let n = per_round.min(count - start);
        let bytes = n * width;
        let src = device(send + (start * width) as u64, bytes)?;
        reduce::contribute(dtype, op, size, src, run.own_slot(bytes));
        run.barrier()?;
        if root.is_none_or(|r| r == me) {
            let mut acc = run.slot(0, bytes).to_vec();
            for r in 1..size {
                reduce::combine(dtype, op, &mut acc, run.slot(r, bytes));
            }
            reduce::finish(dtype, op, size, &mut acc);
            device(recv + (start * width) as u64, bytes)?.copy_from_slice(&acc);
        }
        run.barrier()?;
        start += n;
    }
    Ok(())
}

fn broadcast(
    run: &mut Run<'_>,
    send: u64,
    recv: u64,
    bytes: usize,
    root: usize,
) -> Result<(), Ended> {
    let me = run.member.rank();
    let mut start = 0;
    while start < bytes {
        let n = SLOT.min(bytes - start);
        if me == root {
            let src = device(send + start as u64, n)?;
            run.own_slot(n).copy_from_slice(src);
        }
        run.barrier()?;
        let from = run.slot(root, n).to_vec();
        device(recv + start as u64, n)?.copy_from_slice(&from);
        run.barrier()?;
        start += n;
    }
    Ok(())
}

fn allgather(run: &mut Run<'_>, send: u64, recv: u64, bytes: usize) -> Result<(), Ended> {
    let size = run.member.size();
    let mut start = 0;
    while start < bytes {
        let n = SLOT.min(bytes - start);
        run.own_slot(n)
            .copy_from_slice(device(send + start as u64, n)?);
        run.barrier()?;
        for r in 0..size {
            let from = run.slot(r, n).to_vec();
            device(recv + (r * bytes + start) as u64, n)?.copy_from_slice(&from);
        }
        run.barrier()?;
        start += n;
    }
    Ok(())
}

fn reducescatter(
    run: &mut Run<'_>,
    send: u64,
    recv: u64,
    count: usize,
    dtype: Dtype,
    op: RedOp,
) -> Result<(), Ended> {
    let (me, size, width) = (run.member.rank(), run.member.size(), dtype.size());
    // Each slot holds one region per destination block.
    let region = SLOT / size / width * width;
    let per_round = (region / width).max(1);
    let mut start = 0;
    while start < count {
        let n = per_round.min(count - start);
        let bytes = n * width;
        for block in 0..size {
            let src = device(send + ((block * count + start) * width) as u64, bytes)?;
            let slot = run.own_slot(size * region);
            reduce::contribute(dtype, op, size, src, &mut slot[block * region..][..bytes]);
        }
        run.barrier()?;
        let mut acc = run.slot(0, size * region)[me * region..][..bytes].to_vec();
        for r in 1..size {
            let other = &run.slot(r, size * region)[me * region..][..bytes];
            reduce::combine(dtype, op, &mut acc, other);
        }
        reduce::finish(dtype, op, size, &mut acc);
        device(recv + (start * width) as u64, bytes)?.copy_from_slice(&acc);
        run.barrier()?;
        start += n;
    }
    Ok(())
}

/// A sequence of device buffers read or written as one stream of bytes.
struct Spans {
    spans: Vec<(u64, usize)>,
    at: usize,
    offset: usize,
}

impl Spans {
    fn new(spans: Vec<(u64, usize)>) -> Spans {
        Spans {
            spans,
            at: 0,
            offset: 0,
        }
    }

    /// Moves up to `max` bytes between the spans and `bytes`: `read` copies from the
    /// spans into `bytes`, otherwise from `bytes` into the spans. Returns the count.
    fn transfer(&mut self, bytes: &mut [u8], read: bool) -> Result<usize, Failure> {
        let mut done = 0;
        while done < bytes.len() && self.at < self.spans.len() {
            let (ptr, len) = self.spans[self.at];
            let n = (len - self.offset).min(bytes.len() - done);
            let memory = device(ptr + self.offset as u64, n)?;
            if read {
                bytes[done..done + n].copy_from_slice(memory);
            } else {
                memory.copy_from_slice(&bytes[done..done + n]);
            }
            done += n;
            self.offset += n;
            if self.offset == len {
                self.at += 1;
                self.offset = 0;
            }
        }
        Ok(done)
    }
}

/// Sends and receives of a group: per round, each rank puts the next piece of what it
/// sends each peer into that peer's region of its slot, and takes what each peer sent it.
fn exchange(run: &mut Run<'_>, ops: &[Op], sigs: &[Vec<u8>]) -> Result<(), Ended> {
    let (me, size) = (run.member.rank(), run.member.size());
    let spans = |send: bool, peer: usize| {
        Spans::new(
            ops.iter()
                .filter_map(|op| match *op {
                    Op::Send {
                        buf,
                        count,
                        dtype,
                        peer: p,
                    } if send && p == peer => Some((buf, count * dtype.size())),
                    Op::Recv {
                        buf,
                        count,
                        dtype,
                        peer: p,
                    } if !send && p == peer => Some((buf, count * dtype.size())),
                    _ => None,
                })
                .collect(),
        )
    };
    let mut sends: Vec<Spans> = (0..size).map(|p| spans(true, p)).collect();
    let mut receives: Vec<Spans> = (0..size).map(|p| spans(false, p)).collect();
    // Every rank counts the same rounds, from the signatures: the largest pair's bytes.
    let region = SLOT / size;
    let mut pair_bytes = vec![0usize; size * size];
    for (a, sig) in sigs.iter().enumerate() {
        for e in entries(sig).iter().filter(|e| e.0 == 6) {
            let width = Dtype::from_nccl(i32::from(e.1)).map_or(1, Dtype::size);
            pair_bytes[a * size + e.4 as usize] += e.5 as usize * width;
        }
    }
    let most = pair_bytes.into_iter().max().unwrap_or(0);
    let rounds = most.div_ceil(region.max(1));
    let mut own = Vec::new();
    for _ in 0..rounds {
        for (peer, send) in sends.iter_mut().enumerate() {
            if peer == me {
                let mut piece = vec![0u8; region];
                let n = send.transfer(&mut piece, true)?;
                own.extend_from_slice(&piece[..n]);
                continue;
            }
            let slot = run.own_slot(size * region);
            send.transfer(&mut slot[peer * region..(peer + 1) * region], true)?;
        }
        run.barrier()?;
        for (peer, receive) in receives.iter_mut().enumerate() {
            if peer == me {
                let n = receive.transfer(&mut own, false)?;
                own.drain(..n);
                continue;
            }
            let mut piece = run.slot(peer, size * region)[me * region..(me + 1) * region].to_vec();
            receive.transfer(&mut piece, false)?;
        }
        run.barrier()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allreduce(count: usize) -> Op {
        Op::AllReduce {
            send: 0,
            recv: 0,
            count,
            dtype: Dtype::F32,
            op: RedOp::Sum,
        }
    }

    #[test]
    fn ranks_that_call_different_collectives_are_told_what_each_called() {
        let sigs = [signature(&[allreduce(5)]), signature(&[allreduce(7)])];
        assert_eq!(
            check(&sigs, 3).unwrap_err(),
            "ranks disagree on call 3: rank 0 called ncclAllReduce(count 5, float32, sum), \
             rank 1 called ncclAllReduce(count 7, float32, sum)"
        );
    }

    #[test]
    fn a_send_without_its_receive_is_named_by_pair() {
        let send = Op::Send {
            buf: 0,
            count: 4,
            dtype: Dtype::U8,
            peer: 1,
        };
        let recv = Op::Recv {
            buf: 0,
            count: 3,
            dtype: Dtype::U8,
            peer: 0,
        };
        let sigs = [signature(&[send]), signature(&[recv])];
        assert_eq!(
            check(&sigs, 1).unwrap_err(),
            "send/recv mismatch in call 1: rank 0 sends rank 1 [(1, 4)] (datatype, count) \
             but rank 1 receives [(1, 3)] from rank 0"
        );
    }

    #[test]
    fn units_keep_collectives_alone_and_group_sends_and_receives() {
        let send = Op::Send {
            buf: 0,
            count: 1,
            dtype: Dtype::U8,
            peer: 0,
        };
        let ops = [allreduce(1), send, send, allreduce(2)];
        let lengths: Vec<usize> = units(&ops).iter().map(|u| u.len()).collect();
        assert_eq!(lengths, [1, 2, 1]);
    }
}
