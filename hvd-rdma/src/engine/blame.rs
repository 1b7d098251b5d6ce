//! Blame: which rank a failed call names, and telling the others. The rank that fails
//! first sends an [`Abort`] to every rank but the culprit, so that ranks waiting on
//! someone else fail at once naming it; a rank that times out first looks for such an
//! abort, then for a peer on its host whose process exited, and only then blames the
//! peer it waits for.

use std::time::{Duration, Instant};

use hvd_core::Error;

use hvd_core::driver::{Abort, Call};

use super::lane::{ABORT_TAG, Lane};
use crate::endpoint::{AGAIN, Completion, Endpoint, Failed};
use crate::rendezvous::Process;

/// How long a failing rank tries to deliver its aborts.
const ABORT_GRACE: Duration = Duration::from_millis(500);

/// How long a rank whose transfer failed looks for an abort explaining it.
pub(super) const ABORT_LOOKOUT: Duration = Duration::from_millis(200);

/// How long, at most, a rank that timed out looks for an abort naming the real culprit
/// (and at most a quarter of the call timeout): ranks stalled by one death time out within
/// moments of each other, in no fixed order.
const TIMEOUT_LOOKOUT: Duration = Duration::from_secs(5);

/// The most bytes of an abort's cause that travel.
pub(super) const MAX_CAUSE: usize = 1024;

/// A failed call: the error this rank returns and the rank it blames.
#[derive(Debug)]
pub(crate) struct Fault {
    pub error: Error,
    /// The rank that failed, when one did; it gets no abort.
    pub culprit: Option<usize>,
    /// Whether this came from another rank's abort, which needs no repeating.
    pub reported: bool,
}

impl From<Error> for Box<Fault> {
    fn from(error: Error) -> Self {
        let culprit = match &error {
            Error::PeerLost { peer, .. } => Some(*peer),
            _ => None,
        };
        Box::new(Fault {
            error,
            culprit,
            reported: false,
        })
    }
}

/// What naming the rank to blame needs of the engine, borrowed for one failure.
pub(super) struct Blame<'e> {
    pub endpoint: &'e mut Endpoint,
    pub completions: &'e mut Vec<Completion>,
    /// Every rank's process, by rank, and this one's.
    pub processes: &'e [Process],
    pub me: &'e Process,
    /// The slot of the always-posted receive for aborts.
    pub abort_slot: usize,
    pub op_timeout: Duration,
}

impl Blame<'_> {
    /// Tells every rank but the culprit why this rank's call failed, as far as it can
    /// within a short grace period.
    pub(super) fn abort(&mut self, call: &Call<'_>, fault: &Fault) {
        if fault.reported {
            return;
        }
        let cause = match &fault.error {
            Error::PeerLost { cause, .. } => cause.clone(),
            other => other.to_string(),
        };
        let abort = Abort {
            culprit: fault.culprit.unwrap_or(call.rank),
            reporter: call.rank,
            cause,
        };
        let bytes = abort.encode(MAX_CAUSE);
        let mut pending = Vec::new();
        let dead = |p: usize| self.processes.get(p).is_some_and(|r| r.has_exited(self.me));
        let told: Vec<usize> = (0..call.ranks)
            .filter(|p| *p != call.rank && Some(*p) != fault.culprit && !dead(*p))
            .collect();
        for peer in told {
            let Ok(slot) = self.endpoint.acquire(bytes.len()) else {
                continue;
            };
            self.endpoint.buffer_mut(slot)[..bytes.len()].copy_from_slice(&bytes);
            let tag = ABORT_TAG | call.rank as u64;
            let deadline = Instant::now() + ABORT_GRACE;
            loop {
                match self.endpoint.send(slot, bytes.len(), peer, tag) {
                    0 => {
                        pending.push(slot);
                        break;
                    }
                    AGAIN if Instant::now() < deadline => {
                        let _ = self.endpoint.poll(self.completions);
                    }
                    _ => break,
                }
            }
        }
        let deadline = Instant::now() + ABORT_GRACE;
        while !pending.is_empty() && Instant::now() < deadline {
            self.completions.clear();
            if self.endpoint.poll(self.completions).is_err() {
                break;
            }
            pending.retain(|slot| !self.completions.iter().any(|c| c.slot == *slot));
        }
    }

    /// An operation the provider failed: its peer is named when the slot is known.
    pub(super) fn failed(&self, call: &Call<'_>, lanes: &[Lane], failed: Failed) -> Error {
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
                    op: call.op.name(),
                    tensor: call.tensor.to_owned(),
                    reason: format!(
                        "rank {peer} sent a larger frame than this rank expects: ranks passed tensors of different sizes ({})",
                        failed.text
                    ),
                }
            }
            Some((peer, direction)) => lost(
                call,
                &self.endpoint.provider.name,
                peer,
                format!("{direction} it failed: {}", failed.text),
            ),
            None => local(
                call,
                &self.endpoint.provider.name,
                format!("the completion queue reported: {}", failed.text),
            ),
        }
    }

    /// The call waited too long. Ranks stalled by the same death time out at about the
    /// same moment, so before blaming the peer it waits for, this rank gives the one
    /// nearer the dead rank a moment to say who died.
    pub(super) fn timed_out(
        &mut self,
        call: &Call<'_>,
        lanes: &[Lane],
        peers: &[usize],
        stuck: Option<usize>,
    ) -> Box<Fault> {
        let lookout = TIMEOUT_LOOKOUT.min(self.op_timeout / 4);
        if let Some(reported) = self.abort_within(call, lookout) {
            return reported;
        }
        let fault = self.timeout(call, lanes, peers, stuck);
        let (Some(dead), Error::Timeout { waiting_for, .. }) =
            (self.exited(call.rank), &fault.error)
        else {
            return fault;
        };
        let cause = format!(
            "its process ({}) on this host has exited, found after waiting {:?} for {waiting_for}",
            self.processes[dead].pid, self.op_timeout
        );
        Box::new(Fault {
            error: Error::PeerLost {
                rank: call.rank,
                peer: dead,
                op: call.op.name(),
                tensor: call.tensor.to_owned(),
                cause,
            },
            culprit: Some(dead),
            reported: false,
        })
    }

    /// A rank other than `rank` whose process, on this host, has exited.
    fn exited(&self, rank: usize) -> Option<usize> {
        (0..self.processes.len())
            .filter(|r| *r != rank)
            .find(|r| self.processes[*r].has_exited(self.me))
    }

    /// Another rank's abort, if one arrives within `wait`. Not the driver's
    /// [`settle`](hvd_core::driver::blame::settle): the fabric moves only while polled, so
    /// this polls without pause instead of rereading a store every 20 ms.
    pub(super) fn abort_within(&mut self, call: &Call<'_>, wait: Duration) -> Option<Box<Fault>> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            // Other failures are the ones being explained; keep reading past them.
            let _ = self.endpoint.poll(&mut seen);
            if let Some(done) = seen.iter().find(|c| c.slot == self.abort_slot) {
                return Some(self.reported(call, done.len));
            }
            seen.clear();
            std::thread::yield_now();
        }
        None
    }

    /// Another rank's abort arrived: the call fails naming the rank it blames.
    pub(super) fn reported(&self, call: &Call<'_>, len: usize) -> Box<Fault> {
        let bytes = &self.endpoint.buffer(self.abort_slot)[..len.min(MAX_CAUSE + 64)];
        let abort = Abort::decode(bytes).unwrap_or(Abort {
            culprit: call.rank,
            reporter: call.rank,
            cause: "a rank aborted with an unreadable reason".into(),
        });
        Box::new(Fault {
            error: abort.error(call),
            culprit: Some(abort.culprit),
            reported: true,
        })
    }

    /// The call waited too long; `stuck` is a peer a frame could not even be posted to.
    fn timeout(
        &self,
        call: &Call<'_>,
        lanes: &[Lane],
        peers: &[usize],
        stuck: Option<usize>,
    ) -> Box<Fault> {
        let mut culprit = stuck;
        let mut waiting: Vec<String> = stuck
            .map(|p| format!("rank {p} (the provider takes no more frames for it)"))
            .into_iter()
            .collect();
        for &peer in peers {
            let Some(lane) = lanes.get(peer) else {
                continue;
            };
            let unreceived = lane.recvs.iter().filter(|f| f.done.is_none()).count();
            let unsent = lane.sends.iter().filter(|f| f.done.is_none()).count();
            if unreceived > 0 {
                culprit.get_or_insert(peer);
                waiting.push(format!("rank {peer} ({unreceived} frames not arrived)"));
            } else if unsent > 0 {
                waiting.push(format!("rank {peer} ({unsent} frames not taken)"));
            }
        }
        // A peer that sends nothing is more likely the dead one than one that takes nothing.
        if culprit.is_none() {
            culprit = peers.iter().copied().find(|p| {
                lanes
                    .get(*p)
                    .is_some_and(|l| l.sends.iter().any(|f| f.done.is_none()))
            });
        }
        if waiting.is_empty() {
            waiting.push("the schedule to release a frame".into());
        }
        let error = Error::Timeout {
            rank: call.rank,
            op: call.op.name(),
            tensor: call.tensor.to_owned(),
            waited: self.op_timeout,
            waiting_for: format!(
                "{} over libfabric provider {}",
                waiting.join(", "),
                self.endpoint.provider.name
            ),
        };
        Box::new(Fault {
            error,
            culprit,
            reported: false,
        })
    }
}

/// A peer failed this rank's call.
pub(super) fn lost(call: &Call<'_>, provider: &str, peer: usize, cause: String) -> Error {
    Error::PeerLost {
        rank: call.rank,
        peer,
        op: call.op.name(),
        tensor: call.tensor.to_owned(),
        cause: format!("libfabric provider {provider}: {cause}"),
    }
}

/// A failure on this rank, not a peer's.
pub(super) fn local(call: &Call<'_>, provider: &str, reason: String) -> Error {
    Error::Io {
        context: format!(
            "rank {}: {} of tensor '{}' over libfabric provider {provider}",
            call.rank, call.op, call.tensor
        ),
        message: reason,
        kind: std::io::ErrorKind::Other,
    }
}
