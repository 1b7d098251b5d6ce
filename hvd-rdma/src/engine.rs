//! The engine: runs a [`Schedule`] over an [`Endpoint`], in the calling thread.
//!
//! Each turn posts the frames the schedule releases (up to [`DEPTH`] per peer and
//! direction), reads the completion queue (which is also what makes a manual-progress
//! provider move), and reports finished frames to the schedule in release order, applying
//! each receive's action from its bounce buffer first. A call in which nothing finishes
//! for `op_timeout` fails naming the peers it still waits for; which rank it blames, and
//! how the others hear of it, is [`blame`]'s.

mod blame;
mod lane;

use std::ops::Range;
use std::time::{Duration, Instant};

use hvd_core::schedule::{Action, Data, Done, Layout, MAX_IOV, Recv, Schedule};
use hvd_core::{Error, Result};

use self::blame::{ABORT_LOOKOUT, Blame, Fault, MAX_CAUSE};
use self::lane::{ABORT_TAG, InFlight, Lane, tag};
use crate::endpoint::{AGAIN, Blocked, Code, Completion, Endpoint};
use crate::rendezvous::Process;
use crate::sys;

/// Frames in flight per peer and direction: enough to keep a pipelined ring busy while
/// earlier frames complete, few enough to bound the bounce buffers.
pub(crate) const DEPTH: usize = 4;

/// Frames of at least this many bytes are sent straight from the tensors when the
/// provider needs no registration; smaller ones cost less to copy than to describe.
const DIRECT_MIN: usize = 32 << 10;

/// How long a waiting rank sleeps between polls once it has spun for `spin`.
const NAP: Duration = Duration::from_micros(20);

/// How long, at most, a waiting rank blocks on the provider's descriptor before it
/// looks at the clock again.
const BLOCK: Duration = Duration::from_millis(10);

/// How long a waiting rank polls (yielding between polls) before it naps: as over TCP,
/// long when every rank of this host has a core (waking costs more than a small message
/// takes), short when ranks outnumber cores and the rank waited for may need this one.
pub(crate) fn spin_for(local_ranks: usize) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if local_ranks > cores {
        Duration::from_micros(50)
    } else {
        Duration::from_millis(1)
    }
}

use hvd_core::driver::Call;

/// An endpoint and what running calls over it needs.
#[derive(Debug)]
pub struct Engine {
    pub(crate) endpoint: Endpoint,
    /// Stashed payloads, by peer rank.
    stashes: Vec<Vec<u8>>,
    op_timeout: Duration,
    spin: Duration,
    completions: Vec<Completion>,
    /// The slot of the always-posted receive for aborts.
    abort_slot: usize,
    /// Every rank's process, by rank, and this one's.
    processes: Vec<Process>,
    me: Process,
}

impl Engine {
    /// Takes over an endpoint whose address vector is filled, and posts the receive for
    /// other ranks' aborts.
    pub(crate) fn new(
        mut endpoint: Endpoint,
        processes: Vec<Process>,
        op_timeout: Duration,
        spin: Duration,
    ) -> Result<Self> {
        let len = MAX_CAUSE + 64;
        let abort_slot = endpoint.acquire(len)?;
        let code = endpoint.receive(abort_slot, len, ABORT_TAG, !ABORT_TAG);
        if code != 0 {
            return Err(endpoint.error("fi_trecv (abort)", code as i64));
        }
        Ok(Engine {
            endpoint,
            stashes: vec![Vec::new(); processes.len()],
            op_timeout,
            spin,
            completions: Vec::new(),
            abort_slot,
            processes,
            me: Process::current(),
        })
    }

    /// Runs one call to completion; a failure is not yet told to the other ranks.
    fn drive(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
    ) -> Result<(), Box<Fault>> {
        let peers = schedule.peers();
        if let Some(bad) = peers.iter().find(|p| **p >= call.ranks || **p == call.rank) {
            return Err(self
                .local(call, format!("the schedule names rank {bad} as a peer"))
                .into());
        }
        let mut lanes: Vec<Lane> = (0..call.ranks).map(|_| Lane::default()).collect();
        let mut quiet_since = Instant::now();
        loop {
            let mut moved = false;
            for &peer in &peers {
                moved |= self.post(call, layout, schedule, &mut lanes, peer, quiet_since)?;
            }
            moved |= self.collect(call, &mut lanes)?;
            for &peer in &peers {
                moved |= self.retire(call, layout, schedule, &mut lanes, peer)?;
            }
            if schedule.is_done() {
                return Ok(());
            }
            let now = Instant::now();
            if moved {
                quiet_since = now;
            } else if now.duration_since(quiet_since) >= self.op_timeout {
                return Err(self.blame().timed_out(call, &lanes, &peers, None));
            } else if now.duration_since(quiet_since) >= self.spin {
                match self.endpoint.block(BLOCK) {
                    Blocked::Waited => {}
                    Blocked::Pending => std::thread::yield_now(),
                    Blocked::Unable => std::thread::sleep(NAP),
                }
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Posts the frames to and from `peer` that the schedule releases.
    fn post(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
        lanes: &mut [Lane],
        peer: usize,
        quiet_since: Instant,
    ) -> Result<bool, Box<Fault>> {
        let mut moved = false;
        while lanes[peer].sends.len() < DEPTH {
            let Some(range) = schedule.next_send(peer) else {
                break;
            };
            let frame_tag = tag(call.seq, call.rank, lanes[peer].sent);
            let reads = match self.pieces(layout, &range) {
                Some(pieces) => {
                    let slot = self.acquire(call, 0)?;
                    self.retry(call, lanes, quiet_since, "fi_tsendv", peer, |e| {
                        // SAFETY: the pieces are tensor bytes of this call, which outlive
                        // it; `reads` keeps receives from writing them until completion.
                        unsafe { e.send_vectored(slot, &pieces, peer, frame_tag) }
                    })?;
                    (slot, Some(range))
                }
                None => {
                    let len = range.len();
                    let slot = self.stage(call, layout, range)?;
                    self.retry(call, lanes, quiet_since, "fi_tsend", peer, |e| {
                        e.send(slot, len, peer, frame_tag)
                    })?;
                    (slot, None)
                }
            };
            let lane = &mut lanes[peer];
            lane.sent += 1;
            lane.sends.push_back(InFlight {
                slot: reads.0,
                reads: reads.1,
                in_place: false,
                recv: None,
                done: None,
            });
            moved = true;
        }
        while lanes[peer].recvs.len() < DEPTH {
            let Some(recv) = schedule.next_recv(peer) else {
                break;
            };
            let len = recv.range.len();
            let frame_tag = tag(call.seq, peer, lanes[peer].received);
            let places = match recv.action {
                Action::Place if !being_sent(lanes, &recv.range) => {
                    self.places(layout, &recv.range)
                }
                _ => None,
            };
            let in_place = places.is_some();
            let slot = self.acquire(call, if in_place { 0 } else { len })?;
            match places {
                Some(pieces) => self.retry(call, lanes, quiet_since, "fi_trecvv", peer, |e| {
                    // SAFETY: tensor bytes of this call, which outlive it; the schedule
                    // gives a receive's range to no other transfer until it completes,
                    // and no send reads it in place (checked above).
                    unsafe { e.receive_vectored(slot, &pieces, frame_tag) }
                })?,
                None => self.retry(call, lanes, quiet_since, "fi_trecv", peer, |e| {
                    e.receive(slot, len, frame_tag, 0)
                })?,
            }
            let lane = &mut lanes[peer];
            lane.received += 1;
            lane.recvs.push_back(InFlight {
                slot,
                reads: None,
                in_place,
                recv: Some(recv),
                done: None,
            });
            moved = true;
        }
        Ok(moved)
    }

    /// The pieces of `range` for a send in place, when the provider allows one and the
    /// range is large enough and fits one vectored send.
    fn pieces(&self, layout: &Layout<'_>, range: &Range<usize>) -> Option<Vec<sys::iovec>> {
        if self.endpoint.registers || range.len() < DIRECT_MIN {
            return None;
        }
        let mut slices = [std::io::IoSlice::new(&[]); MAX_IOV];
        let limit = self.endpoint.iov_limit.clamp(1, MAX_IOV);
        let count = layout.gather(range.clone(), &mut slices[..limit]);
        let pieces: Vec<sys::iovec> = slices[..count]
            .iter()
            .map(|s| sys::iovec {
                iov_base: s.as_ptr().cast_mut().cast(),
                iov_len: s.len(),
            })
            .collect();
        let covered: usize = pieces.iter().map(|p| p.iov_len).sum();
        (covered == range.len()).then_some(pieces)
    }

    /// The pieces of `range` for a receive in place, under the same conditions as
    /// [`Self::pieces`]; none where the range is read-only input.
    fn places(&self, layout: &mut Layout<'_>, range: &Range<usize>) -> Option<Vec<sys::iovec>> {
        if self.endpoint.registers || range.len() < DIRECT_MIN {
            return None;
        }
        let mut slices = layout.scatter(range.clone()).ok()?;
        if slices.len() > self.endpoint.rx_iov_limit.max(1) {
            return None;
        }
        let pieces: Vec<sys::iovec> = slices
            .iter_mut()
            .map(|s| sys::iovec {
                iov_base: s.as_mut_ptr().cast(),
                iov_len: s.len(),
            })
            .collect();
        let covered: usize = pieces.iter().map(|p| p.iov_len).sum();
        (covered == range.len()).then_some(pieces)
    }

    /// A bounce buffer of at least `len` bytes.
    fn acquire(&mut self, call: &Call<'_>, len: usize) -> Result<usize> {
        if len > self.endpoint.max_message {
            return Err(self.local(
                call,
                format!(
                    "a frame of {len} bytes exceeds the provider's largest message ({} bytes)",
                    self.endpoint.max_message
                ),
            ));
        }
        self.endpoint.acquire(len)
    }

    /// Copies `range` of the layout into a bounce buffer.
    fn stage(
        &mut self,
        call: &Call<'_>,
        layout: &Layout<'_>,
        range: Range<usize>,
    ) -> Result<usize> {
        let slot = self.acquire(call, range.len())?;
        let buffer = self.endpoint.buffer_mut(slot);
        let mut pieces = [std::io::IoSlice::new(&[]); MAX_IOV];
        let (mut at, mut filled) = (range.start, 0);
        while at < range.end {
            let count = layout.gather(at..range.end, &mut pieces);
            let before = filled;
            for piece in &pieces[..count] {
                buffer[filled..filled + piece.len()].copy_from_slice(piece);
                filled += piece.len();
            }
            if filled == before {
                self.endpoint.release(slot);
                return Err(self.local(
                    call,
                    format!("frame {range:?} lies outside the call's tensors"),
                ));
            }
            at += filled - before;
        }
        Ok(slot)
    }

    /// Posts with `post`, reading completions while the provider's queue is full.
    fn retry(
        &mut self,
        call: &Call<'_>,
        lanes: &mut [Lane],
        quiet_since: Instant,
        what: &str,
        peer: usize,
        mut post: impl FnMut(&mut Endpoint) -> Code,
    ) -> Result<(), Box<Fault>> {
        // A provider that shares memory with a peer on this host (libfabric's shm) spins
        // forever on a lock in the peer's region that the peer held when it was killed:
        // no timeout can end that call, so a dead peer is not sent to at all. Other
        // providers cannot hang a post, so the check (a system call) waits until one is
        // refused: rxm refuses posts to a peer it is reconnecting to, dead or not.
        let mut refused = self.endpoint.provider.shares_memory();
        loop {
            if refused
                && let Some(process) = self.processes.get(peer).filter(|p| p.has_exited(&self.me))
            {
                let cause = format!(
                    "its process ({}) on this host has exited; nothing more is sent to it",
                    process.pid
                );
                return Err(self.lost(call, peer, cause).into());
            }
            let code = post(&mut self.endpoint);
            if code == 0 {
                return Ok(());
            }
            if code != AGAIN {
                let cause = format!("{what} failed: {}", self.endpoint.strerror(code as i64));
                return Err(self.lost(call, peer, cause).into());
            }
            refused = true;
            self.collect(call, lanes)?;
            std::thread::yield_now();
            if quiet_since.elapsed() >= self.op_timeout {
                let others: Vec<usize> = (0..call.ranks).filter(|p| *p != call.rank).collect();
                return Err(self.blame().timed_out(call, lanes, &others, Some(peer)));
            }
        }
    }

    /// Reads the completion queue and marks what finished.
    fn collect(&mut self, call: &Call<'_>, lanes: &mut [Lane]) -> Result<bool, Box<Fault>> {
        self.completions.clear();
        if let Err(failed) = self.endpoint.poll(&mut self.completions) {
            // A survivor that failed first may have exited since, which fails transfers
            // from it too: its abort, if one came, names the real culprit.
            if let Some(reported) = self.blame().abort_within(call, ABORT_LOOKOUT) {
                return Err(reported);
            }
            return Err(self.blame().failed(call, lanes, failed).into());
        }
        let abort = self.completions.iter().find(|c| c.slot == self.abort_slot);
        if let Some(len) = abort.map(|c| c.len) {
            return Err(self.blame().reported(call, len));
        }
        for done in &self.completions {
            let entry = lanes
                .iter_mut()
                .flat_map(|l| l.sends.iter_mut().chain(l.recvs.iter_mut()))
                .find(|f| f.slot == done.slot && f.done.is_none());
            if let Some(entry) = entry {
                entry.done = Some(done.len);
            }
        }
        Ok(!self.completions.is_empty())
    }

    /// Reports the finished frames at the head of `peer`'s lane, in release order. A
    /// receive that would write bytes a send still reads in place waits for that send.
    fn retire(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
        lanes: &mut [Lane],
        peer: usize,
    ) -> Result<bool, Box<Fault>> {
        let mut moved = false;
        while lanes[peer].sends.front().is_some_and(|f| f.done.is_some()) {
            if let Some(frame) = lanes[peer].sends.pop_front() {
                self.endpoint.release(frame.slot);
            }
            self.complete(call, layout, schedule, Done::Sent(peer))?;
            moved = true;
        }
        while let Some(InFlight {
            slot,
            recv: Some(recv),
            done: Some(len),
            in_place,
            ..
        }) = lanes[peer].recvs.front()
        {
            if !in_place && recv.action != Action::Stash && being_sent(lanes, &recv.range) {
                break;
            }
            let (slot, len, recv, in_place) = (*slot, *len, recv.clone(), *in_place);
            lanes[peer].recvs.pop_front();
            let applied = if !in_place {
                self.apply(call, layout, peer, slot, len, &recv)
            } else if len != recv.range.len() {
                Err(mismatched(call, peer, len, recv.range.len()))
            } else {
                Ok(())
            };
            self.endpoint.release(slot);
            applied?;
            self.complete(call, layout, schedule, Done::Received(peer))?;
            moved = true;
        }
        Ok(moved)
    }

    /// Does what the schedule asked with a received frame.
    fn apply(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        peer: usize,
        slot: usize,
        len: usize,
        recv: &Recv,
    ) -> Result<()> {
        if len != recv.range.len() {
            return Err(mismatched(call, peer, len, recv.range.len()));
        }
        let payload = &self.endpoint.buffer(slot)[..len];
        let at = recv.range.start;
        let done = match recv.action {
            Action::Place => layout.write(at, payload),
            Action::Reduce => layout.reduce_from(at, payload, call.reduction.op),
            Action::ReduceFinish => layout
                .reduce_from(at, payload, call.reduction.op)
                .and_then(|()| layout.finish(recv.range.clone(), call.reduction, call.ranks)),
            Action::Stash => {
                let stash = &mut self.stashes[peer];
                stash.clear();
                stash.extend_from_slice(payload);
                Ok(())
            }
        };
        done.map_err(|e| self.local(call, e.to_string()))
    }

    fn complete(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
        done: Done,
    ) -> Result<()> {
        let mut data = Data {
            layout,
            stashes: &self.stashes,
        };
        schedule
            .complete(done, &mut data)
            .map_err(|e| self.local(call, e.to_string()))
    }

    /// A failure on this rank, not a peer's.
    fn local(&self, call: &Call<'_>, reason: String) -> Error {
        blame::local(call, &self.endpoint.provider.name, reason)
    }

    fn lost(&self, call: &Call<'_>, peer: usize, cause: String) -> Error {
        blame::lost(call, &self.endpoint.provider.name, peer, cause)
    }

    /// What naming the rank to blame needs of this engine.
    fn blame(&mut self) -> Blame<'_> {
        Blame {
            endpoint: &mut self.endpoint,
            completions: &mut self.completions,
            processes: &self.processes,
            me: &self.me,
            abort_slot: self.abort_slot,
            op_timeout: self.op_timeout,
        }
    }
}

impl hvd_core::driver::Engine for Engine {
    /// A failure is told to every rank but the culprit, so that ranks waiting on
    /// someone else fail at once naming it.
    fn run(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
    ) -> Result<()> {
        let Err(fault) = self.drive(call, layout, schedule) else {
            return Ok(());
        };
        self.blame().abort(call, &fault);
        Err(fault.error)
    }
}

/// Whether a send still in flight reads any byte of `range` in place.
fn being_sent(lanes: &[Lane], range: &Range<usize>) -> bool {
    lanes.iter().flat_map(|l| &l.sends).any(|f| {
        f.done.is_none()
            && f.reads
                .as_ref()
                .is_some_and(|r| r.start < range.end && range.start < r.end)
    })
}

fn mismatched(call: &Call<'_>, peer: usize, got: usize, expected: usize) -> Error {
    Error::InvalidArgument {
        rank: call.rank,
        op: call.op.name(),
        tensor: call.tensor.to_owned(),
        reason: format!(
            "rank {peer} sent a frame of {got} bytes where {expected} were expected: ranks passed tensors of different sizes"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_separate_calls_senders_and_frames() {
        assert_eq!(tag(1, 2, 3), 0x0001_0002_0000_0003);
        assert_ne!(tag(1, 2, 3), tag(2, 2, 3));
        assert_ne!(tag(1, 2, 3), tag(1, 3, 3));
        assert_eq!(tag(0x8005, 0, 0), tag(5, 0, 0));
        assert_eq!(tag(u32::MAX, 0xffff, u32::MAX) & ABORT_TAG, 0);
    }
}
