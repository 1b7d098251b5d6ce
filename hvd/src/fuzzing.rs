//! Entry points for the fuzz targets in `fuzz/`: every decoder of bytes that another
//! process sends to this one. Compiled only with `--cfg fuzzing` (as `cargo fuzz`
//! builds), so they are no part of the API.

use std::io::Cursor;

use crate::rendezvous::wire::{self, Direction};
use crate::runtime::Announcement;

/// A negotiation announcement, as rank 1 sends it to rank 0.
pub fn negotiation(bytes: &[u8]) {
    let _ = Announcement::decode(bytes, 1, 0);
}

/// A rendezvous frame from the socket, then its body as a request and as a response.
pub fn rendezvous(bytes: &[u8]) {
    let mut stream = Cursor::new(bytes);
    let _ = wire::read_frame(
        &mut stream,
        b"secret",
        Direction::Request,
        &[0; wire::NONCE_BYTES],
        wire::MAX_FIRST_BODY,
    );
    let _ = wire::Request::decode(bytes);
    let _ = wire::Response::decode(bytes);
}
