//! Hand-offs between the threads that submit collectives and the background thread,
//! without a sleep on the fast path.
//!
//! Waking a thread parked on a condition variable costs 20-50 µs on a busy or virtual
//! machine, more than a small allreduce, and a tensor the background thread runs crosses
//! two hand-offs (submission to it, completion back; a caller that waits runs the cycle
//! itself and crosses none). So each side first polls a flag for a short while, yielding
//! the core between polls (the thread it waits for may share that core), and parks only
//! when the wait turns out long.

use std::time::{Duration, Instant};

/// How long the background thread polls the queue after a cycle that had work before it
/// parks: longer than the gap between a completion and the caller's next submission.
pub(crate) const QUEUE_POLL: Duration = Duration::from_micros(200);

/// How long a caller waiting on a handle polls before it parks: longer than a small
/// collective takes.
pub(crate) const HANDLE_POLL: Duration = Duration::from_micros(500);

/// Polls `ready` until it holds or `budget` has passed; returns whether it held.
pub(crate) fn poll_until(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if start.elapsed() >= budget {
            return false;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_as_soon_as_ready() {
        let mut calls = 0;
        assert!(poll_until(Duration::from_secs(10), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
    }

    #[test]
    fn gives_up_after_the_budget() {
        let start = Instant::now();
        assert!(!poll_until(Duration::from_millis(2), || false));
        assert!(start.elapsed() >= Duration::from_millis(2));
    }
}
