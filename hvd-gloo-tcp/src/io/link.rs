//! One established connection to a peer, and the frames in flight on it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::ops::Range;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use socket2::SockRef;

use super::incoming::Incoming;
use super::outgoing::Outgoing;
use crate::fault::Call;
use crate::frame::{Abort, HEADER_LEN, Header, Kind, MAX_ABORT_LEN, read_abort};
use hvd_core::schedule::{Layout, Recv};

/// A connection to one peer.
#[derive(Debug)]
pub(crate) struct Link {
    pub peer: usize,
    pub addr: SocketAddr,
    pub stream: TcpStream,
    /// Frames released to this peer in the current call; the next one's number.
    sent: u32,
    /// Frames expected from this peer in the current call.
    received: u32,
    pub outgoing: Option<Outgoing>,
    pub incoming: Option<Incoming>,
    /// The reduce window of this link's receives.
    pub scratch: Vec<u8>,
}

/// What the first bytes waiting on an idle connection are.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// Nothing, a frame of a later call, or part of one.
    Nothing,
    /// The peer closed or reset the connection.
    Closed,
    /// An ABORT frame, now consumed.
    Abort(Abort),
    /// Bytes that are no frame.
    Garbage(crate::frame::Unexpected),
}

impl Link {
    pub(crate) fn new(peer: usize, addr: SocketAddr, stream: TcpStream) -> Self {
        Link {
            peer,
            addr,
            stream,
            sent: 0,
            received: 0,
            outgoing: None,
            incoming: None,
            scratch: Vec::new(),
        }
    }

    /// Starts a new call: frames are numbered from zero again.
    pub(crate) fn begin(&mut self) {
        self.sent = 0;
        self.received = 0;
        self.outgoing = None;
        self.incoming = None;
    }

    pub(crate) fn start_send(&mut self, call: &Call<'_>, range: Range<usize>) {
        let header = Header::data(call.op, call.seq, self.sent, range.len());
        self.sent = self.sent.wrapping_add(1);
        self.outgoing = Some(Outgoing::new(header.encode(), range));
    }

    pub(crate) fn start_recv(&mut self, call: &Call<'_>, recv: Recv) {
        let header = Header::data(call.op, call.seq, self.received, recv.range.len());
        self.received = self.received.wrapping_add(1);
        self.incoming = Some(Incoming::new(header, recv));
    }

    /// Looks at what waits on a connection that has no frame in flight, without taking
    /// it, unless it is an ABORT frame.
    pub(crate) fn inspect(&mut self) -> Waiting {
        let mut buf = [0u8; HEADER_LEN + MAX_ABORT_LEN];
        let seen = match self.stream.peek(&mut buf) {
            Ok(0) => return Waiting::Closed,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Waiting::Nothing,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Waiting::Nothing,
            Err(_) => return Waiting::Closed,
        };
        let Some(head) = buf
            .first_chunk::<HEADER_LEN>()
            .filter(|_| seen >= HEADER_LEN)
        else {
            return Waiting::Nothing;
        };
        let header = match Header::decode(head) {
            Ok(header) => header,
            Err(garbage) => return Waiting::Garbage(garbage),
        };
        // Only an abort is read here, and decode caps its length; a data header's
        // length is the next call's business and is not added up.
        if header.kind != Kind::Abort {
            return Waiting::Nothing;
        }
        let total = HEADER_LEN + header.len as usize;
        if seen < total {
            return Waiting::Nothing;
        }
        // The whole frame is buffered in the kernel, so this read takes it at once.
        if (&self.stream).read_exact(&mut buf[..total]).is_err() {
            return Waiting::Closed;
        }
        match read_abort(&buf[HEADER_LEN..total]) {
            Ok(abort) => Waiting::Abort(abort),
            Err(garbage) => Waiting::Garbage(garbage),
        }
    }

    /// Best effort, before the connection is given up: finishes the frame the peer is in
    /// the middle of reading (so that the ABORT after it is read as a frame), sends the
    /// ABORT frame, and shuts down the sending side, all by `deadline`.
    pub(crate) fn abort(&mut self, layout: &Layout<'_>, frame: &[u8], deadline: Instant) {
        let finished = match self.outgoing.as_mut() {
            Some(out) if out.is_partial() => finish_frame(&self.stream, out, layout, deadline),
            _ => true,
        };
        let socket = SockRef::from(&self.stream);
        if finished && socket.set_nonblocking(false).is_ok() {
            let left = deadline.saturating_duration_since(Instant::now());
            if socket
                .set_write_timeout(Some(left.max(Duration::from_millis(1))))
                .is_ok()
            {
                // Best effort: the peer may be gone, which is why we are here.
                let _ = (&self.stream).write_all(frame);
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        self.outgoing = None;
        self.incoming = None;
    }
}

/// Writes the rest of a partial frame, waiting for room until `deadline`.
fn finish_frame(
    stream: &TcpStream,
    out: &mut Outgoing,
    layout: &Layout<'_>,
    deadline: Instant,
) -> bool {
    loop {
        match out.advance(stream, layout) {
            Ok(progress) if progress.done => return true,
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_micros(200)),
            _ => return false,
        }
    }
}
