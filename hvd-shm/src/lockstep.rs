//! The one synchronisation every operation is built from: a *step*.
//!
//! In step `k` every rank writes its own slot of parity `k % 2`, publishes `k` in its
//! counter, waits until every counter reads at least `k`, and then reads the slots of
//! parity `k % 2` of any rank. A rank writes that slot again in step `k + 2`, which it
//! starts only after every rank has published `k + 1`, and ranks publish `k + 1` only
//! after they have finished reading step `k`: so two slots per rank are enough, and a
//! fast rank fills its next slot while slow ones still read the last.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hvd_core::{Error, Result};

use crate::fault::{self, Abort, Reason};
use crate::futex;
use crate::liveness;
use crate::op::{Call, Op};
use crate::segment::Segment;

/// How long one futex sleep lasts at most, so that dead peers are noticed.
const SLEEP_SLICE: Duration = Duration::from_millis(50);

/// How often a sleeping rank checks that its peers' processes still run.
const LIVENESS_EVERY: Duration = Duration::from_millis(100);

/// What a step publishes about itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Desc {
    pub(crate) code: u64,
    /// A size every rank must publish alike.
    pub(crate) size: u64,
    /// A free value for the others to read.
    pub(crate) value: u64,
}

impl Desc {
    pub(crate) fn new(op: Op, size: usize) -> Self {
        Desc {
            code: op.code(0),
            size: size as u64,
            value: 0,
        }
    }
}

/// How a rank waits: spins for `spin`, then polls for up to `poll` in all, yielding the
/// core between polls, then sleeps on the peer's counter until `timeout`. Yielding lets a
/// peer that the scheduler put on the same core run at once, instead of after the poll.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Patience {
    pub(crate) spin: Duration,
    pub(crate) poll: Duration,
    pub(crate) timeout: Duration,
}

/// One rank's side of a group's steps.
#[derive(Debug)]
pub(crate) struct Lockstep {
    segment: Segment,
    rank: usize,
    /// The last step this rank published.
    step: u32,
    patience: Patience,
    /// Process ids of the peers whose processes this rank can watch, 0 for the others.
    watched: Vec<u32>,
    /// The failure that ended the group: every later call returns it.
    poisoned: Option<Error>,
}

/// Whether a counter that reads `seen` has reached step `want`, across wrap-around.
fn reached(seen: u32, want: u32) -> bool {
    seen.wrapping_sub(want) as i32 >= 0
}

impl Lockstep {
    pub(crate) fn new(segment: Segment, rank: usize, patience: Patience) -> Self {
        let watched = (0..segment.layout().ranks())
            .map(|peer| {
                let pid = segment.control(peer).pid.load(Ordering::Acquire);
                if peer != rank && liveness::can_watch(pid) {
                    pid
                } else {
                    0
                }
            })
            .collect();
        Lockstep {
            segment,
            rank,
            step: 0,
            patience,
            watched,
            poisoned: None,
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn size(&self) -> usize {
        self.segment.layout().ranks()
    }

    pub(crate) fn slot_bytes(&self) -> usize {
        self.segment.layout().slot_bytes()
    }

    pub(crate) fn region_bytes(&self) -> usize {
        self.segment.layout().region_bytes()
    }

    /// Fails when an earlier failure ended the group.
    pub(crate) fn usable(&self) -> Result<()> {
        match &self.poisoned {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// This rank's slot for the next step, to fill before [`Lockstep::sync`].
    pub(crate) fn slot_mut(&mut self) -> &mut [u8] {
        let parity = self.step.wrapping_add(1) as usize % 2;
        self.segment.slot_mut(self.rank, parity)
    }

    /// The slot of `peer` in the step just synchronised, to read.
    pub(crate) fn slot(&self, peer: usize) -> &[u8] {
        self.segment.slot(peer, self.step as usize % 2)
    }

    /// The free value `peer` published in the step just synchronised.
    pub(crate) fn value(&self, peer: usize) -> u64 {
        let parity = self.step as usize % 2;
        self.segment.control(peer).desc[parity]
            .value
            .load(Ordering::Relaxed)
    }

    /// Publishes the next step, described by `desc`, and waits until every rank has
    /// published it and described it alike.
    pub(crate) fn sync(&mut self, call: &Call<'_>, desc: Desc) -> Result<()> {
        self.check_abort(call)?;
        let step = self.step.wrapping_add(1);
        let parity = step as usize % 2;
        let me = self.segment.control(self.rank);
        let cell = &me.desc[parity];
        cell.code.store(desc.code, Ordering::Relaxed);
        cell.size.store(desc.size, Ordering::Relaxed);
        cell.value.store(desc.value, Ordering::Relaxed);
        // SeqCst pairs with the waiter's SeqCst increment of `waiters` then read of `seq`:
        // either the waiter sees the new step or this rank sees the waiter and wakes it.
        me.seq.store(step, Ordering::SeqCst);
        if me.waiters.load(Ordering::SeqCst) != 0 {
            futex::wake_all(&me.seq);
        }
        self.step = step;
        let rank = self.rank;
        for peer in (0..self.size()).filter(|p| *p != rank) {
            self.wait_for(peer, step, call)?;
        }
        self.same_step_everywhere(desc, parity, call)
    }

    /// Every rank checks every peer's description, so all of them return the same kind of
    /// error at the same step and the group stays in step for the next call.
    fn same_step_everywhere(&self, mine: Desc, parity: usize, call: &Call<'_>) -> Result<()> {
        for peer in (0..self.size()).filter(|p| *p != self.rank) {
            let cell = &self.segment.control(peer).desc[parity];
            let (code, size) = (
                cell.code.load(Ordering::Relaxed),
                cell.size.load(Ordering::Relaxed),
            );
            let mismatch = |property, value_a, value_b| Error::Mismatch {
                property,
                tensor: call.tensor.into(),
                rank_a: self.rank,
                value_a,
                rank_b: peer,
                value_b,
            };
            if code != mine.code {
                return Err(mismatch(
                    "operations",
                    Op::describe(mine.code),
                    Op::describe(code),
                ));
            }
            if size != mine.size {
                return Err(mismatch(
                    "sizes in bytes",
                    mine.size.to_string(),
                    size.to_string(),
                ));
            }
        }
        Ok(())
    }

    fn wait_for(&mut self, peer: usize, want: u32, call: &Call<'_>) -> Result<()> {
        let seq = &self.segment.control(peer).seq;
        if reached(seq.load(Ordering::Acquire), want) {
            return Ok(());
        }
        let started = Instant::now();
        while started.elapsed() < self.patience.poll {
            let spinning = started.elapsed() < self.patience.spin;
            for _ in 0..64 {
                if reached(seq.load(Ordering::Acquire), want) {
                    return Ok(());
                }
                if spinning {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        self.sleep_until(peer, want, started, call)
    }

    fn sleep_until(
        &mut self,
        peer: usize,
        want: u32,
        started: Instant,
        call: &Call<'_>,
    ) -> Result<()> {
        // Processes are checked only after a while: most sleeps are short, and the check
        // costs system calls per peer.
        let mut next_pid_check = started + LIVENESS_EVERY;
        loop {
            self.check_abort(call)?;
            let now = Instant::now();
            let pids = now >= next_pid_check;
            if pids {
                next_pid_check = now + LIVENESS_EVERY;
            }
            self.check_peers(want, pids, call)?;
            let control = self.segment.control(peer);
            let waited = now - started;
            if waited >= self.patience.timeout {
                let seen = control.seq.load(Ordering::Acquire);
                let error = fault::stuck(self.rank, peer, seen, want, self.patience.timeout, call);
                return Err(self.fail(peer, Reason::Stuck, error));
            }
            control.waiters.fetch_add(1, Ordering::SeqCst);
            let seen = control.seq.load(Ordering::SeqCst);
            if !reached(seen, want) {
                let left = self.patience.timeout - waited;
                futex::wait(&control.seq, seen, left.min(SLEEP_SLICE));
            }
            control.waiters.fetch_sub(1, Ordering::SeqCst);
            if reached(control.seq.load(Ordering::Acquire), want) {
                return Ok(());
            }
        }
    }

    /// Fails when another rank has closed the group.
    fn check_abort(&mut self, call: &Call<'_>) -> Result<()> {
        let word = self.segment.header().abort.load(Ordering::Acquire);
        match Abort::decode(word) {
            Some(abort) => {
                let error = abort.reported(self.rank, call);
                self.poisoned = Some(error.clone());
                Err(error)
            }
            None => Ok(()),
        }
    }

    /// Fails on the first peer behind step `want` that left or, when `pids` is set, whose
    /// process exited.
    fn check_peers(&mut self, want: u32, pids: bool, call: &Call<'_>) -> Result<()> {
        for peer in (0..self.size()).filter(|p| *p != self.rank) {
            let control = self.segment.control(peer);
            if reached(control.seq.load(Ordering::Acquire), want) {
                continue;
            }
            let pid = self.watched[peer];
            let reason = if control.left.load(Ordering::Acquire) != 0 {
                Reason::Left
            } else if pids && pid != 0 && liveness::has_exited(pid) {
                Reason::Exited
            } else {
                continue;
            };
            let error = fault::lost(self.rank, peer, pid, reason, call);
            return Err(self.fail(peer, reason, error));
        }
        Ok(())
    }

    /// Ends the group on this rank and tells the others, unless one already has.
    fn fail(&mut self, culprit: usize, reason: Reason, error: Error) -> Error {
        let abort = Abort {
            culprit,
            reporter: self.rank,
            reason,
        };
        let header = self.segment.header();
        let _first =
            header
                .abort
                .compare_exchange(0, abort.encode(), Ordering::AcqRel, Ordering::Acquire);
        self.segment.wake_everyone();
        tracing::warn!("{error}; the shared-memory group is closed");
        self.poisoned = Some(error.clone());
        error
    }
}

impl Drop for Lockstep {
    fn drop(&mut self) {
        self.segment
            .control(self.rank)
            .left
            .store(1, Ordering::Release);
        self.segment.wake_everyone();
    }
}

#[cfg(test)]
mod tests {
    use super::reached;

    #[test]
    fn counters_compare_across_wrap_around() {
        assert!(reached(5, 5));
        assert!(reached(6, 5));
        assert!(!reached(4, 5));
        assert!(reached(1, u32::MAX));
        assert!(!reached(u32::MAX, 1));
    }
}
