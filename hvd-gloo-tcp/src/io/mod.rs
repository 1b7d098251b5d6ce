//! The event loop: one `mio` loop per group that runs a [`Schedule`] over nonblocking
//! sockets, in the calling thread.
//!
//! Each turn moves every frame in flight as far as its socket allows (sending, receiving
//! and reducing all overlap, with no thread hand-off per message), asks the schedule for
//! the frames that became ready, and only when nothing moved waits for readiness: first
//! by polling for up to `busy_poll` (yielding the core between polls when ranks outnumber
//! cores), then by sleeping in `epoll_wait`. While it waits it looks at connections with
//! no frame in flight, where an ABORT from another rank may arrive. If no byte moves for
//! `op_timeout`, the call fails naming the silent peers.

mod incoming;
mod link;
mod outgoing;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::fault::{Call, Fault};
use crate::frame::abort_frame;
use hvd_core::schedule::{Data, Done, Layout, Schedule};
use incoming::{Buffers, Failure};
pub(crate) use link::Link;
use link::Waiting;

/// About this many bytes move on one connection in one direction before the event loop
/// turns to the other transfers: reads stop after it (a long receive would hold up
/// sending, and the peer), sends after the first call that reaches it (each offers the
/// rest of its frame: a chunk of a pipelined transfer, or a whole small message).
/// Measured on loopback: reads of 256 KiB beat 128 KiB, 512 KiB and no limit.
const BURST: usize = 256 << 10;

/// How long a failing rank tries to deliver its ABORT frames.
const ABORT_GRACE: Duration = Duration::from_millis(500);

/// How a waiting rank polls before it sleeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Polling {
    /// How long to poll without sleeping.
    pub busy: Duration,
    /// Whether to yield the core between polls: right when ranks outnumber cores (the
    /// rank this one waits for may need this core), wrong otherwise (ranks that keep
    /// yielding to each other stay "cache hot" and the scheduler never spreads two of
    /// them that share a core over idle ones).
    pub yield_between: bool,
}

impl Polling {
    /// Measured on 2 cores: with a core per rank, 1 ms of polling keeps both ranks awake
    /// through a call (4 KiB allreduce 6 us, against 25 us and more when a rank sleeps);
    /// with 4 ranks on 2 cores, 50 us of polling with yields halves small-message times
    /// against no polling, while longer polling starves the rank being waited for.
    pub(crate) fn for_ranks_on_host(local_ranks: usize, configured: Option<Duration>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let oversubscribed = local_ranks > cores;
        let automatic = if oversubscribed {
            Duration::from_micros(50)
        } else {
            Duration::from_millis(1)
        };
        Polling {
            busy: configured.unwrap_or(automatic),
            yield_between: oversubscribed,
        }
    }
}

/// The connections of one group and the machinery to run calls over them.
#[derive(Debug)]
pub(crate) struct EventLoop {
    links: Vec<Option<Link>>,
    /// Stashed payloads, by peer rank.
    stashes: Vec<Vec<u8>>,
    poll: Poll,
    events: Events,
    op_timeout: Duration,
    polling: Polling,
}

impl EventLoop {
    /// Takes over the connections of a group of `size` ranks.
    pub(crate) fn new(
        size: usize,
        links: Vec<Link>,
        op_timeout: Duration,
        polling: Polling,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        let mut slots: Vec<Option<Link>> = (0..size).map(|_| None).collect();
        for mut link in links {
            let interest = Interest::READABLE | Interest::WRITABLE;
            poll.registry()
                .register(&mut link.stream, Token(link.peer), interest)?;
            let peer = link.peer;
            if let Some(slot) = slots.get_mut(peer) {
                *slot = Some(link);
            }
        }
        Ok(EventLoop {
            links: slots,
            stashes: vec![Vec::new(); size],
            poll,
            events: Events::with_capacity(64),
            op_timeout,
            polling,
        })
    }

    /// Runs one call to completion.
    pub(crate) fn run(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
    ) -> Result<(), Box<Fault>> {
        let peers = schedule.peers();
        for peer in &peers {
            self.link(call, *peer)?.begin();
        }
        let mut quiet_since = Instant::now();
        loop {
            let mut moved = false;
            for peer in &peers {
                moved |= self.drive_sends(call, layout, schedule, *peer)?;
                moved |= self.drive_receives(call, layout, schedule, *peer)?;
            }
            if schedule.is_done() {
                return Ok(());
            }
            if moved {
                quiet_since = Instant::now();
            } else {
                self.wait(call, &peers, quiet_since)?;
            }
        }
    }

    fn link(&mut self, call: &Call<'_>, peer: usize) -> Result<&mut Link, Box<Fault>> {
        match self.links.get_mut(peer) {
            Some(Some(link)) => Ok(link),
            _ => Err(no_link(call, peer)),
        }
    }

    fn drive_sends(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
        peer: usize,
    ) -> Result<bool, Box<Fault>> {
        let mut moved = false;
        loop {
            let link = self.link(call, peer)?;
            if link.outgoing.is_none() {
                let Some(range) = schedule.next_send(peer) else {
                    break;
                };
                link.start_send(call, range);
            }
            let Some(out) = link.outgoing.as_mut() else {
                break;
            };
            let progress = match out.advance(&link.stream, layout) {
                Ok(progress) => progress,
                Err(e) => return Err(explained(call, link, Fault::io(call, peer, &e)).into()),
            };
            moved |= progress.moved;
            if !progress.done {
                break;
            }
            link.outgoing = None;
            let mut data = Data {
                layout,
                stashes: &self.stashes,
            };
            schedule
                .complete(Done::Sent(peer), &mut data)
                .map_err(|e| Fault::local(call, &e))?;
        }
        Ok(moved)
    }

    fn drive_receives(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
        peer: usize,
    ) -> Result<bool, Box<Fault>> {
        let mut moved = false;
        loop {
            // Not `self.link()`: the stash below is borrowed from `self` at the same time.
            let Some(Some(link)) = self.links.get_mut(peer) else {
                return Err(no_link(call, peer));
            };
            if link.incoming.is_none() {
                let Some(recv) = schedule.next_recv(peer) else {
                    break;
                };
                link.start_recv(call, recv);
            }
            let Some(incoming) = link.incoming.as_mut() else {
                break;
            };
            let mut bufs = Buffers {
                layout,
                stash: &mut self.stashes[peer],
                scratch: &mut link.scratch,
                reduction: call.reduction,
                ranks: call.ranks,
            };
            let progress = incoming
                .advance(&link.stream, &mut bufs)
                .map_err(|failure| fault_of(call, peer, link.addr, failure))?;
            moved |= progress.moved;
            if !progress.done {
                break;
            }
            link.incoming = None;
            let mut data = Data {
                layout,
                stashes: &self.stashes,
            };
            schedule
                .complete(Done::Received(peer), &mut data)
                .map_err(|e| Fault::local(call, &e))?;
        }
        Ok(moved)
    }

    /// Waits until a socket is ready, watching idle connections for ABORT frames.
    fn wait(
        &mut self,
        call: &Call<'_>,
        peers: &[usize],
        quiet_since: Instant,
    ) -> Result<(), Box<Fault>> {
        let deadline = quiet_since + self.op_timeout;
        // A poll as long as the timeout or longer still ends at the deadline.
        let spin_until = Instant::now()
            .checked_add(self.polling.busy)
            .unwrap_or(deadline);
        loop {
            let now = Instant::now();
            let timeout = if now >= deadline {
                return Err(self.timeout(call, peers).into());
            } else if now < spin_until {
                Duration::ZERO
            } else {
                deadline - now
            };
            match self.poll.poll(&mut self.events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Fault::local(call, &e).into()),
            }
            if !self.events.is_empty() {
                return self.inspect_idle(call);
            }
            if timeout.is_zero() && self.polling.yield_between {
                std::thread::yield_now();
            }
        }
    }

    /// Looks for ABORT frames or garbage on the connections that became readable while no
    /// frame was expected from them.
    fn inspect_idle(&mut self, call: &Call<'_>) -> Result<(), Box<Fault>> {
        for event in self.events.iter() {
            let peer = event.token().0;
            let Some(Some(link)) = self.links.get_mut(peer) else {
                continue;
            };
            if link.incoming.is_some()
                || !(event.is_readable() || event.is_read_closed() || event.is_error())
            {
                continue;
            }
            match link.inspect() {
                Waiting::Abort(abort) => return Err(Fault::reported(call, abort).into()),
                Waiting::Garbage(what) => {
                    return Err(Fault::unexpected(call, peer, link.addr, what).into());
                }
                // A peer that closed between calls may just be done; it is an error only
                // if this call needs it, which reading from it will show.
                Waiting::Closed | Waiting::Nothing => {}
            }
        }
        Ok(())
    }

    fn timeout(&self, call: &Call<'_>, peers: &[usize]) -> Fault {
        let mut silent = Vec::new();
        let mut details = Vec::new();
        for link in peers
            .iter()
            .filter_map(|p| self.links.get(*p).and_then(Option::as_ref))
        {
            if let Some(incoming) = &link.incoming {
                silent.push(link.peer);
                details.push(format!(
                    "frame {} from rank {} has not arrived",
                    incoming.item(),
                    link.peer
                ));
            } else if link.outgoing.is_some() {
                silent.push(link.peer);
                details.push(format!("rank {} takes no more bytes", link.peer));
            }
        }
        Fault::timeout(call, self.op_timeout, &silent, details.join("; "))
    }

    /// Tells every peer, as far as it can within a short grace period, that this rank's
    /// call failed and why, then shuts the connections down for sending.
    pub(crate) fn abort(&mut self, fault: &Fault, call: &Call<'_>, layout: &Layout<'_>) {
        let frame = abort_frame(&fault.abort(), call.op, call.seq);
        let deadline = Instant::now() + ABORT_GRACE;
        for link in self.links.iter_mut().flatten() {
            if link.peer != fault.culprit {
                link.abort(layout, &frame, deadline);
            } else {
                let _ = link.stream.shutdown(std::net::Shutdown::Write);
            }
        }
    }
}

/// A schedule named a peer this group has no connection to: a bug, reported as such.
fn no_link(call: &Call<'_>, peer: usize) -> Box<Fault> {
    let err = io::Error::other(format!("no connection to rank {peer}"));
    Box::new(Fault::local(call, &err))
}

/// A peer that failed this rank's send may have aborted first and said why in a frame
/// that waits unread: that report names the real culprit.
fn explained(call: &Call<'_>, link: &mut Link, fault: Fault) -> Fault {
    if link.incoming.is_none()
        && let Waiting::Abort(abort) = link.inspect()
    {
        return Fault::reported(call, abort);
    }
    fault
}

fn fault_of(call: &Call<'_>, peer: usize, addr: SocketAddr, failure: Failure) -> Fault {
    match failure {
        Failure::Io(e) => Fault::io(call, peer, &e),
        Failure::Closed(None) => Fault::lost(call, peer, "it closed the connection".into()),
        Failure::Closed(Some(how_far)) => Fault::lost(
            call,
            peer,
            format!("it closed the connection in the middle of a frame ({how_far})"),
        ),
        Failure::Unexpected(what) => Fault::unexpected(call, peer, addr, what),
        Failure::Aborted(abort) => Fault::reported(call, abort),
        Failure::Local(e) => Fault::local(call, &e),
    }
}
