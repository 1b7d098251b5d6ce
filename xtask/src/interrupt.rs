//! Ctrl-C (or a kill) while a simulated cluster is up: xtask notes it instead of dying,
//! so that the test run it started stops and the cluster is still torn down.
//! Children get the default handlers back when they start (exec resets caught signals),
//! so a Ctrl-C still stops them at once.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

const SIGHUP: i32 = 1;
const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

extern "C" fn note(_signal: i32) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

unsafe extern "C" {
    /// libc's `signal(2)`; xtask has no dependencies, so it is declared here.
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
}

/// From now on, SIGINT, SIGTERM and SIGHUP are noted rather than fatal.
pub fn catch() {
    for signum in [SIGHUP, SIGINT, SIGTERM] {
        // SAFETY: `note` only stores to an atomic, which is async-signal-safe.
        unsafe { signal(signum, note) };
    }
}

/// Whether one of those signals came.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
