//! Schedules made of phases that run one after the other: every transfer of a phase may
//! proceed at once, and the next phase starts when all of them are done. Recursive
//! doubling, halving and doubling, the barrier and the direct exchanges (alltoall, small
//! allgather, by one round or by recursive doubling) are this.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;

use crate::Reduction;

use super::{Data, Done, Recv, Schedule};

/// What runs when every transfer of a phase is done.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Then {
    #[default]
    Nothing,
    /// Combines the payload stashed from `from` into `into`, then finishes the reduction
    /// there if `finish` (the last contribution).
    Reduce {
        from: usize,
        into: Range<usize>,
        reduction: Reduction,
        ranks: usize,
        finish: bool,
    },
}

/// Transfers that may run at the same time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Phase {
    pub sends: Vec<(usize, Range<usize>)>,
    pub recvs: Vec<(usize, Recv)>,
    pub then: Then,
}

impl Phase {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn send(mut self, peer: usize, range: Range<usize>) -> Self {
        self.sends.push((peer, range));
        self
    }

    pub fn recv(mut self, peer: usize, recv: Recv) -> Self {
        self.recvs.push((peer, recv));
        self
    }

    pub fn then(mut self, then: Then) -> Self {
        self.then = then;
        self
    }
}

/// Runs phases in order.
#[derive(Debug)]
pub struct Phases {
    /// Phases not started yet.
    later: VecDeque<Phase>,
    peers: Vec<usize>,
    /// Transfers of the current phase not yet released, by peer rank.
    sends: Vec<VecDeque<Range<usize>>>,
    recvs: Vec<VecDeque<Recv>>,
    /// Transfers of the current phase released but not yet done.
    pending: usize,
    /// What runs when the current phase is done.
    then: Then,
}

impl Phases {
    /// Phases without transfers are left out: nothing would mark them done.
    pub fn new(size: usize, phases: Vec<Phase>) -> Self {
        let mut later: VecDeque<Phase> = phases
            .into_iter()
            .filter(|p| !(p.sends.is_empty() && p.recvs.is_empty()))
            .collect();
        let mut peers: Vec<usize> = later
            .iter()
            .flat_map(|p| {
                p.sends
                    .iter()
                    .map(|s| s.0)
                    .chain(p.recvs.iter().map(|r| r.0))
            })
            .collect();
        peers.sort_unstable();
        peers.dedup();
        let first = later.pop_front();
        let mut phases = Phases {
            later,
            peers,
            sends: vec![VecDeque::new(); size],
            recvs: vec![VecDeque::new(); size],
            pending: 0,
            then: Then::Nothing,
        };
        if let Some(first) = first {
            phases.load(first);
        }
        phases
    }

    fn load(&mut self, phase: Phase) {
        for (peer, range) in phase.sends {
            self.sends[peer].push_back(range);
        }
        for (peer, recv) in phase.recvs {
            self.recvs[peer].push_back(recv);
        }
        self.then = phase.then;
    }

    fn drained(&self) -> bool {
        self.pending == 0
            && self.sends.iter().all(VecDeque::is_empty)
            && self.recvs.iter().all(VecDeque::is_empty)
    }

    /// Runs the end of the current phase and starts the next one.
    fn next_phase(&mut self, data: &mut Data<'_, '_>) -> io::Result<()> {
        if let Then::Reduce {
            from,
            into,
            reduction,
            ranks,
            finish,
        } = std::mem::replace(&mut self.then, Then::Nothing)
        {
            let stash = &data.stashes[from][..into.len()];
            data.layout.reduce_from(into.start, stash, reduction.op)?;
            if finish {
                data.layout.finish(into, reduction, ranks)?;
            }
        }
        if let Some(phase) = self.later.pop_front() {
            self.load(phase);
        }
        Ok(())
    }
}

impl Schedule for Phases {
    fn peers(&self) -> Vec<usize> {
        self.peers.clone()
    }

    fn next_send(&mut self, peer: usize) -> Option<Range<usize>> {
        let range = self.sends.get_mut(peer)?.pop_front()?;
        self.pending += 1;
        Some(range)
    }

    fn next_recv(&mut self, peer: usize) -> Option<Recv> {
        let recv = self.recvs.get_mut(peer)?.pop_front()?;
        self.pending += 1;
        Some(recv)
    }

    fn complete(&mut self, _: Done, data: &mut Data<'_, '_>) -> io::Result<()> {
        self.pending = self.pending.saturating_sub(1);
        if self.drained() {
            self.next_phase(data)?;
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.later.is_empty() && self.drained() && self.then == Then::Nothing
    }
}
