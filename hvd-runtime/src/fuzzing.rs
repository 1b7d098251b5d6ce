//! The entry point for the `negotiation` fuzz target in `fuzz/`: the decoder of the
//! announcements other ranks send. Compiled only with `--cfg fuzzing` (as `cargo fuzz`
//! builds), so it is no part of the API.

use crate::wire::Announcement;

/// A negotiation announcement, as rank 1 sends it to rank 0.
pub fn negotiation(bytes: &[u8]) {
    let _ = Announcement::decode(bytes, 1, 0);
}
