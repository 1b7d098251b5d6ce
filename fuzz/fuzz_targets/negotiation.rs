//! A negotiation announcement from another rank.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| hvd_runtime::fuzzing::negotiation(bytes));
