//! The engine: runs a [`Schedule`] over an [`Endpoint`], in the calling thread.
//!
//! Each turn posts the frames the schedule releases (up to [`DEPTH`] per peer and
//! direction), reads the completion queue (which is also what makes a manual-progress
//! provider move), and reports finished frames to the schedule in release order, applying
//! each receive's action from its bounce buffer first. A call in which nothing finishes
//! for `op_timeout` fails naming the peers it still waits for.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use hvd_core::schedule::{Action, Data, Done, Layout, MAX_IOV, Recv, Schedule};
use hvd_core::{Error, Reduction, Result};

use crate::endpoint::{AGAIN, Code, Completion, Endpoint, Failed};

/// Frames in flight per peer and direction: enough to keep a pipelined ring busy while
/// earlier frames complete, few enough to bound the bounce buffers.
pub(crate) const DEPTH: usize = 4;

/// After this long without progress a waiting rank sleeps between polls, leaving the
/// core to ranks that have work.
const SPIN: Duration = Duration::from_millis(1);
const NAP: Duration = Duration::from_micros(20);

/// The call a frame belongs to, for tags and messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub rank: usize,
    pub ranks: usize,
    pub op: &'static str,
    pub tensor: &'a str,
    pub seq: u32,
    /// The reduction that reduce actions apply (`Sum` for calls that do not reduce).
    pub reduction: Reduction,
}

/// The tag of frame `frame` from `from` in call `seq`: both sides count frames per peer
/// and direction, so the `n`-th send meets the `n`-th receive. The sender's rank is in
/// the tag because receives accept any source.
fn tag(seq: u32, from: usize, frame: u32) -> u64 {
    (u64::from(seq & 0xffff) << 48) | (((from & 0xffff) as u64) << 32) | u64::from(frame)
}

#[derive(Debug)]
struct InFlight {
    slot: usize,
    /// What to do with a received frame (`None` for sends).
    recv: Option<Recv>,
    /// Set when the operation completed: the bytes that arrived.
    done: Option<usize>,
}

/// The frames of a call to and from one peer.
#[derive(Debug, Default)]
struct Lane {
    sends: VecDeque<InFlight>,
    recvs: VecDeque<InFlight>,
    sent: u32,
    received: u32,
}

/// An endpoint and what running calls over it needs.
#[derive(Debug)]
pub(crate) struct Engine {
    pub endpoint: Endpoint,
    /// Stashed payloads, by peer rank.
    stashes: Vec<Vec<u8>>,
    op_timeout: Duration,
    completions: Vec<Completion>,
}

impl Engine {
    pub(crate) fn new(endpoint: Endpoint, size: usize, op_timeout: Duration) -> Self {
        Engine {
            endpoint,
            stashes: vec![Vec::new(); size],
            op_timeout,
            completions: Vec::new(),
        }
    }

    /// Runs one call to completion.
    pub(crate) fn run(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
    ) -> Result<()> {
        let peers = schedule.peers();
        if let Some(bad) = peers.iter().find(|p| **p >= call.ranks || **p == call.rank) {
            return Err(self.local(call, format!("the schedule names rank {bad} as a peer")));
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
                moved |= self.retire(call, layout, schedule, &mut lanes[peer], peer)?;
            }
            if schedule.is_done() {
                return Ok(());
            }
            let now = Instant::now();
            if moved {
                quiet_since = now;
            } else if now.duration_since(quiet_since) >= self.op_timeout {
                return Err(self.timeout(call, &lanes, &peers));
            } else if now.duration_since(quiet_since) >= SPIN {
                std::thread::sleep(NAP);
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Posts the frames to and from `peer` that the schedule releases.
    fn post(
        &mut self,
        call: &Call<'_>,
        layout: &Layout<'_>,
        schedule: &mut dyn Schedule,
        lanes: &mut [Lane],
        peer: usize,
        quiet_since: Instant,
    ) -> Result<bool> {
        let mut moved = false;
        while lanes[peer].sends.len() < DEPTH {
            let Some(range) = schedule.next_send(peer) else {
                break;
            };
            let len = range.len();
            let slot = self.stage(call, layout, range)?;
            let frame_tag = tag(call.seq, call.rank, lanes[peer].sent);
            self.retry(call, lanes, quiet_since, "fi_tsend", peer, |e| {
                e.send(slot, len, peer, frame_tag)
            })?;
            let lane = &mut lanes[peer];
            lane.sent += 1;
            lane.sends.push_back(InFlight {
                slot,
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
            let slot = self.acquire(call, len)?;
            let frame_tag = tag(call.seq, peer, lanes[peer].received);
            self.retry(call, lanes, quiet_since, "fi_trecv", peer, |e| {
                e.receive(slot, len, frame_tag)
            })?;
            let lane = &mut lanes[peer];
            lane.received += 1;
            lane.recvs.push_back(InFlight {
                slot,
                recv: Some(recv),
                done: None,
            });
            moved = true;
        }
        Ok(moved)
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
    ) -> Result<()> {
        loop {
            let code = post(&mut self.endpoint);
            if code == 0 {
                return Ok(());
            }
            if code != AGAIN {
                return Err(self.lost(
                    call,
                    peer,
                    format!("{what} failed: {}", self.endpoint.strerror(code as i64)),
                ));
            }
            self.collect(call, lanes)?;
            if quiet_since.elapsed() >= self.op_timeout {
                let peers: Vec<usize> = (0..call.ranks).filter(|p| *p != call.rank).collect();
                return Err(self.timeout(call, lanes, &peers));
            }
        }
    }

    /// Reads the completion queue and marks what finished.
    fn collect(&mut self, call: &Call<'_>, lanes: &mut [Lane]) -> Result<bool> {
        self.completions.clear();
        if let Err(failed) = self.endpoint.poll(&mut self.completions) {
            return Err(self.failed(call, lanes, failed));
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

    /// Reports the finished frames at the head of `lane`, in release order.
    fn retire(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
        lane: &mut Lane,
        peer: usize,
    ) -> Result<bool> {
        let mut moved = false;
        while lane.sends.front().is_some_and(|f| f.done.is_some()) {
            if let Some(frame) = lane.sends.pop_front() {
                self.endpoint.release(frame.slot);
            }
            self.complete(call, layout, schedule, Done::Sent(peer))?;
            moved = true;
        }
        while let Some(InFlight {
            slot,
            recv: Some(recv),
            done: Some(len),
        }) = lane.recvs.front()
        {
            let (slot, len, recv) = (*slot, *len, recv.clone());
            lane.recvs.pop_front();
            let applied = self.apply(call, layout, peer, slot, len, &recv);
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
        Error::Io {
            context: format!(
                "rank {}: {} of tensor '{}' over libfabric provider {}",
                call.rank, call.op, call.tensor, self.endpoint.provider.name
            ),
            message: reason,
            kind: std::io::ErrorKind::Other,
        }
    }

    fn lost(&self, call: &Call<'_>, peer: usize, cause: String) -> Error {
        Error::PeerLost {
            rank: call.rank,
            peer,
            op: call.op,
            tensor: call.tensor.to_owned(),
            cause: format!(
                "libfabric provider {}: {cause}",
                self.endpoint.provider.name
            ),
        }
    }

    /// An operation the provider failed: its peer is named when the slot is known.
    fn failed(&self, call: &Call<'_>, lanes: &[Lane], failed: Failed) -> Error {
        let found = failed.slot.and_then(|slot| {
            lanes.iter().enumerate().find_map(|(peer, lane)| {
                if lane.sends.iter().any(|f| f.slot == slot) {
                    Some((peer, "sending to"))
                } else if lane.recvs.iter().any(|f| f.slot == slot) {
                    Some((peer, "receiving from"))
                } else {
                    None
                }
            })
        });
        match found {
            Some((peer, _)) if failed.code == crate::sys::FI_ETRUNC as i32 => {
                Error::InvalidArgument {
                    rank: call.rank,
                    op: call.op,
                    tensor: call.tensor.to_owned(),
                    reason: format!(
                        "rank {peer} sent a larger frame than this rank expects: ranks passed tensors of different sizes ({})",
                        failed.text
                    ),
                }
            }
            Some((peer, direction)) => self.lost(
                call,
                peer,
                format!("{direction} it failed: {}", failed.text),
            ),
            None => self.local(
                call,
                format!("the completion queue reported: {}", failed.text),
            ),
        }
    }

    fn timeout(&self, call: &Call<'_>, lanes: &[Lane], peers: &[usize]) -> Error {
        let mut waiting = Vec::new();
        for &peer in peers {
            let Some(lane) = lanes.get(peer) else {
                continue;
            };
            let unreceived = lane.recvs.iter().filter(|f| f.done.is_none()).count();
            let unsent = lane.sends.iter().filter(|f| f.done.is_none()).count();
            if unreceived > 0 {
                waiting.push(format!("rank {peer} ({unreceived} frames not arrived)"));
            } else if unsent > 0 {
                waiting.push(format!("rank {peer} ({unsent} frames not taken)"));
            }
        }
        if waiting.is_empty() {
            waiting.push("the schedule to release a frame".into());
        }
        Error::Timeout {
            rank: call.rank,
            op: call.op,
            tensor: call.tensor.to_owned(),
            waited: self.op_timeout,
            waiting_for: format!(
                "{} over libfabric provider {}",
                waiting.join(", "),
                self.endpoint.provider.name
            ),
        }
    }
}

fn mismatched(call: &Call<'_>, peer: usize, got: usize, expected: usize) -> Error {
    Error::InvalidArgument {
        rank: call.rank,
        op: call.op,
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
        assert_eq!(tag(0x1_0005, 0, 0), tag(5, 0, 0));
    }
}
