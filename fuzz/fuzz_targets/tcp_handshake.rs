//! The HELLO that opens a TCP transport connection, from anyone who can connect.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| hvd_gloo_tcp::fuzzing::handshake(bytes));
