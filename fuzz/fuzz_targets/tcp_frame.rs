//! A TCP transport frame header and ABORT payload from a peer.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| hvd_gloo_tcp::fuzzing::frame(bytes));
