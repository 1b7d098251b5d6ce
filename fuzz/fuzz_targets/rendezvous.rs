//! A rendezvous store frame and body, from a client or a stranger.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| hvd_rendezvous::fuzzing::rendezvous(bytes));
