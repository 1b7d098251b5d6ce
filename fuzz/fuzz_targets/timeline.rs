//! A batch of timeline events another rank sends to rank 0, rendered as rank 0 would.
#![no_main]

use std::sync::LazyLock;

static DIR: LazyLock<tempfile::TempDir> =
    LazyLock::new(|| tempfile::tempdir().expect("a directory for the trace file"));

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| hvd_timeline::fuzzing::gather(bytes, DIR.path()));
