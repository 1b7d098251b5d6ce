//! A frame on its way in. Its header is checked before any byte lands in a tensor; the
//! payload is then placed, reduced as it arrives, or stashed for the schedule.
//!
//! Small payloads are read together with their header into a staging buffer (one system
//! call per message) and copied into place once the header checks out; large ones are read
//! straight into the tensors. Reductions read through a window that stays in cache and
//! combine every whole element as soon as it is there, so receiving and reducing overlap.

use std::io::{self, IoSliceMut, Read};

use hvd_core::Reduction;
use mio::net::TcpStream;

use super::BURST;
use super::outgoing::Progress;
use crate::frame::{Abort, HEADER_LEN, Header, Kind, Unexpected, read_abort};
use hvd_core::schedule::{Action, Layout, Recv};

/// Payloads up to this size are staged, so that header and payload arrive in one read.
const STAGE_LIMIT: usize = 64 << 10;
/// Size of the window reductions read through: large enough for few system calls, small
/// enough to stay in the core's L2 cache.
pub(crate) const REDUCE_WINDOW: usize = 256 << 10;

/// Why a frame could not be received.
#[derive(Debug)]
pub(crate) enum Failure {
    Io(io::Error),
    /// The peer closed the connection; `None` between frames, otherwise how far into
    /// the frame.
    Closed(Option<String>),
    Unexpected(Unexpected),
    Aborted(Abort),
    /// This rank could not store the payload.
    Local(io::Error),
}

/// The buffers a receive may use.
#[derive(Debug)]
pub(crate) struct Buffers<'b, 'a> {
    pub layout: &'b mut Layout<'a>,
    pub stash: &'b mut Vec<u8>,
    pub scratch: &'b mut Vec<u8>,
    pub reduction: Reduction,
    pub ranks: usize,
}

/// The payload of an ABORT frame that arrived where a data frame was expected.
#[derive(Debug)]
struct AbortPayload {
    bytes: Vec<u8>,
    got: usize,
}

/// A frame being received.
#[derive(Debug)]
pub(crate) struct Incoming {
    expected: Header,
    recv: Recv,
    header: [u8; HEADER_LEN],
    header_got: usize,
    checked: bool,
    /// Payload bytes read.
    got: usize,
    /// Payload bytes reduced into the layout (reduce actions).
    applied: usize,
    abort: Option<AbortPayload>,
}

impl Incoming {
    pub(crate) fn new(expected: Header, recv: Recv) -> Self {
        Incoming {
            expected,
            recv,
            header: [0; HEADER_LEN],
            header_got: 0,
            checked: false,
            got: 0,
            applied: 0,
            abort: None,
        }
    }

    fn len(&self) -> usize {
        self.recv.range.len()
    }

    fn staged(&self) -> bool {
        match self.recv.action {
            Action::Stash => true,
            Action::Place => self.len() <= STAGE_LIMIT,
            Action::Reduce | Action::ReduceFinish => false,
        }
    }

    fn reduces(&self) -> bool {
        matches!(self.recv.action, Action::Reduce | Action::ReduceFinish)
    }

    fn finished(&self) -> bool {
        self.checked
            && if self.reduces() {
                self.applied == self.len()
            } else {
                self.got == self.len()
            }
    }

    /// The frame number, for messages.
    pub(crate) fn item(&self) -> u32 {
        self.expected.item
    }

    /// Reads until the frame is complete, the socket is drained, or a [`BURST`] came.
    pub(crate) fn advance(
        &mut self,
        stream: &TcpStream,
        bufs: &mut Buffers<'_, '_>,
    ) -> Result<Progress, Failure> {
        let mut moved = false;
        let mut total = 0;
        while !self.finished() && total < BURST {
            let read = match self.read_once(stream, bufs) {
                Ok(0) => return Err(self.closed()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Failure::Io(e)),
            };
            moved = true;
            total += read;
            self.absorb(read, bufs)?;
        }
        Ok(Progress {
            moved,
            done: self.finished(),
        })
    }

    fn closed(&self) -> Failure {
        if self.header_got == 0 && self.abort.is_none() {
            return Failure::Closed(None);
        }
        let got = self.header_got + self.got + self.abort.as_ref().map_or(0, |a| a.got);
        Failure::Closed(Some(format!(
            "it sent {got} of the {} bytes of frame {}",
            HEADER_LEN + self.len(),
            self.expected.item
        )))
    }

    /// One vectored read: the rest of the header, plus as much payload as may go where
    /// this frame's payload goes.
    fn read_once(&mut self, stream: &TcpStream, bufs: &mut Buffers<'_, '_>) -> io::Result<usize> {
        let len = self.len();
        let staged = self.staged();
        let reduces = self.reduces();
        let mut slices: Vec<IoSliceMut<'_>> = Vec::with_capacity(4);
        slices.push(IoSliceMut::new(&mut self.header[self.header_got..]));
        if let Some(abort) = &mut self.abort {
            slices.push(IoSliceMut::new(&mut abort.bytes[abort.got..]));
        } else if staged {
            if bufs.stash.len() < len {
                bufs.stash.resize(len, 0);
            }
            slices.push(IoSliceMut::new(&mut bufs.stash[self.got..len]));
        } else if reduces {
            let window = REDUCE_WINDOW.min(len);
            if bufs.scratch.len() < window {
                bufs.scratch.resize(window, 0);
            }
            let fill = self.got - self.applied;
            let end = window.min(fill + (len - self.got));
            slices.push(IoSliceMut::new(&mut bufs.scratch[fill..end]));
        } else if self.checked {
            let start = self.recv.range.start + self.got;
            slices.extend(bufs.layout.scatter(start..self.recv.range.end)?);
        }
        (&*stream).read_vectored(&mut slices)
    }

    /// Accounts for `read` new bytes: checks the header once it is whole, then applies
    /// whatever payload can be applied.
    fn absorb(&mut self, read: usize, bufs: &mut Buffers<'_, '_>) -> Result<(), Failure> {
        let to_header = read.min(HEADER_LEN - self.header_got);
        self.header_got += to_header;
        let payload = read - to_header;
        if let Some(abort) = &mut self.abort {
            abort.got += payload;
        } else {
            self.got += payload;
        }
        if self.header_got == HEADER_LEN && !self.checked && self.abort.is_none() {
            self.check(bufs)?;
        }
        if let Some(abort) = &self.abort {
            return match abort.got == abort.bytes.len() {
                true => {
                    Err(read_abort(&abort.bytes).map_or_else(Failure::Unexpected, Failure::Aborted))
                }
                false => Ok(()),
            };
        }
        if self.checked {
            self.apply(bufs)?;
        }
        Ok(())
    }

    fn check(&mut self, bufs: &Buffers<'_, '_>) -> Result<(), Failure> {
        let header = Header::decode(&self.header).map_err(Failure::Unexpected)?;
        if header.kind == Kind::Abort {
            // Payload bytes that came with the header sit where this frame's payload went.
            let mut bytes = vec![0u8; header.len as usize];
            let early = self.got.min(bytes.len());
            let staging: &[u8] = if self.staged() {
                bufs.stash
            } else {
                bufs.scratch
            };
            bytes[..early].copy_from_slice(&staging[..early]);
            self.abort = Some(AbortPayload { bytes, got: early });
            self.got = 0;
            return Ok(());
        }
        header.expect(&self.expected).map_err(Failure::Unexpected)?;
        self.checked = true;
        Ok(())
    }

    fn apply(&mut self, bufs: &mut Buffers<'_, '_>) -> Result<(), Failure> {
        let start = self.recv.range.start;
        match self.recv.action {
            Action::Place if self.staged() && self.got == self.len() => bufs
                .layout
                .write(start, &bufs.stash[..self.len()])
                .map_err(Failure::Local),
            Action::Reduce | Action::ReduceFinish => {
                let end = bufs.layout.align_down(start + self.got) - start;
                if end <= self.applied {
                    return Ok(());
                }
                let span = end - self.applied;
                let fill = self.got - self.applied;
                let at = start + self.applied;
                let op = bufs.reduction.op;
                bufs.layout
                    .reduce_from(at, &bufs.scratch[..span], op)
                    .map_err(Failure::Local)?;
                if self.recv.action == Action::ReduceFinish {
                    bufs.layout
                        .finish(at..at + span, bufs.reduction, bufs.ranks)
                        .map_err(Failure::Local)?;
                }
                bufs.scratch.copy_within(span..fill, 0);
                self.applied = end;
                Ok(())
            }
            Action::Place | Action::Stash => Ok(()),
        }
    }
}
