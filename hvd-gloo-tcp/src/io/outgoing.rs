//! A frame on its way out: header and payload, written with as few calls as the socket
//! allows and never blocking.

use std::io::{self, IoSlice};
use std::ops::Range;

use mio::net::TcpStream;
use socket2::SockRef;

use super::BURST;
use crate::frame::HEADER_LEN;
use hvd_core::schedule::{Layout, MAX_IOV};

/// How much a write attempt achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Some bytes moved.
    pub moved: bool,
    /// The whole frame has moved.
    pub done: bool,
}

/// A frame being sent: its header, then the payload range of the layout.
#[derive(Debug)]
pub(crate) struct Outgoing {
    header: [u8; HEADER_LEN],
    range: Range<usize>,
    /// Bytes of header and payload written so far.
    written: usize,
}

impl Outgoing {
    pub(crate) fn new(header: [u8; HEADER_LEN], range: Range<usize>) -> Self {
        Outgoing {
            header,
            range,
            written: 0,
        }
    }

    fn total(&self) -> usize {
        HEADER_LEN + self.range.len()
    }

    /// True when some but not all of the frame is written: the peer is in the middle of
    /// reading it, so nothing else may go on this connection until it is finished.
    pub(crate) fn is_partial(&self) -> bool {
        self.written > 0 && self.written < self.total()
    }

    /// Writes until the frame is done, the socket is full, or at least a [`BURST`] has
    /// gone.
    pub(crate) fn advance(
        &mut self,
        stream: &TcpStream,
        layout: &Layout<'_>,
    ) -> io::Result<Progress> {
        let socket = SockRef::from(stream);
        let mut moved = false;
        let started = self.written;
        while self.written < self.total() && self.written - started < BURST {
            let mut slices = [IoSlice::new(&[]); MAX_IOV + 1];
            let mut count = 0;
            if self.written < HEADER_LEN {
                slices[0] = IoSlice::new(&self.header[self.written..]);
                count = 1;
            }
            // The whole rest of the frame in one call: the kernel takes what fits, and
            // fewer, larger calls measured faster on loopback than BURST-sized ones
            // (broadcast and allgather at 16 MiB, 2 ranks: 1.2x to 1.5x).
            let from = self.range.start + self.written.saturating_sub(HEADER_LEN);
            count += layout.gather(from..self.range.end, &mut slices[count..]);
            // MSG_NOSIGNAL: a dead peer must be an error, not a SIGPIPE that kills us.
            match socket.send_vectored_with_flags(&slices[..count], libc::MSG_NOSIGNAL) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Progress {
            moved,
            done: self.written == self.total(),
        })
    }
}
