//! The entry point for the `rendezvous` fuzz target in `fuzz/`: the decoder of the frames
//! a store's clients and server send. Compiled only with `--cfg fuzzing` (as `cargo fuzz`
//! builds), so it is no part of the API.

use std::io::Cursor;

use crate::wire::{self, Direction};

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
