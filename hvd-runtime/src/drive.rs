//! Who runs a process set's cycles: a caller waiting on a handle, or the set's background
//! thread.
//!
//! A lone small collective used to cross two hand-offs between threads (submission to
//! the background thread, completion back); on a loaded or virtual machine each costs
//! more than the collective itself. So a caller that waits on a handle runs the cycles
//! itself until its operation completes, and the background thread runs them the rest of
//! the time: asynchronous work nobody waits on yet, and the idle cycles the other ranks'
//! negotiation needs. The engine is behind a lock, so one thread at a time steps it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};
use std::thread::Thread;

use super::engine::{By, Engine};

/// The engine, whether it has run what comes before the first cycle, whether its last
/// cycle had work (the next wait polls before it parks), and who ran that cycle.
struct Stepper {
    engine: Engine,
    started: bool,
    busy: bool,
    last: By,
}

/// One process set's engine, stepped by whichever thread is there to step it.
pub(crate) struct Driver {
    /// `None` once the engine has stopped (everything it held has failed).
    state: Mutex<Option<Stepper>>,
    queue: std::sync::Arc<super::queue::Queue>,
    /// Set while a caller drives: the background thread stays out of its way.
    caller_driving: AtomicBool,
    /// The background thread, woken when a caller leaves work behind.
    background: OnceLock<Thread>,
}

impl Driver {
    pub fn new(engine: Engine, queue: std::sync::Arc<super::queue::Queue>) -> Driver {
        Driver {
            state: Mutex::new(Some(Stepper {
                engine,
                started: false,
                busy: false,
                last: By::Background,
            })),
            queue,
            caller_driving: AtomicBool::new(false),
            background: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Stepper>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_lock(&self) -> Option<MutexGuard<'_, Option<Stepper>>> {
        match self.state.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Runs one cycle; false once the engine has stopped.
    fn step(state: &mut Option<Stepper>, by: By) -> bool {
        let Some(stepper) = state.as_mut() else {
            return false;
        };
        // Whichever thread steps first starts the engine: its first collective must be
        // the same on every rank.
        if !stepper.started {
            stepper.started = true;
            if stepper.engine.start().is_err() {
                *state = None;
                return false;
            }
        }
        match stepper.engine.step(by, stepper.busy) {
            Some(busy) => {
                stepper.busy = busy;
                stepper.last = by;
                true
            }
            None => {
                *state = None;
                false
            }
        }
    }

    /// The background thread's loop: runs cycles whenever no caller does, until the
    /// engine stops.
    pub fn run_background(&self) {
        let _ = self.background.set(std::thread::current());
        let mut cycle_time = match self.lock().as_ref() {
            Some(stepper) => stepper.engine.cycle_time(),
            None => return,
        };
        loop {
            if self.caller_driving.load(Ordering::Acquire) {
                std::thread::park_timeout(cycle_time);
                continue;
            }
            // The cycle time changes as the autotuner goes. Polling for more work pays
            // after this thread's own busy cycles only: after a caller's, the caller
            // itself is the likeliest to submit next, and drive.
            let busy;
            (busy, cycle_time) = match self.lock().as_ref() {
                Some(stepper) => (
                    stepper.busy && stepper.last == By::Background,
                    stepper.engine.cycle_time(),
                ),
                None => return,
            };
            self.queue.wait_for_work(cycle_time, busy);
            // The submitter of a burst waits on it next, and then drives.
            self.queue.settle();
            if self.caller_driving.load(Ordering::Acquire) {
                continue;
            }
            let Some(mut state) = self.try_lock() else {
                std::thread::yield_now();
                continue;
            };
            if !Self::step(&mut state, By::Background) {
                return;
            }
        }
    }

    /// Runs cycles on the calling thread until `done` holds, unless another thread is
    /// running them; then the caller waits as before.
    pub fn drive_until(&self, done: impl Fn() -> bool) {
        if done() || self.caller_driving.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(mut state) = self.try_lock() else {
            self.caller_driving.store(false, Ordering::Release);
            return;
        };
        while !done() && Self::step(&mut state, By::Caller) {}
        let left_work = state
            .as_ref()
            .is_some_and(|stepper| stepper.engine.has_pending())
            || self.queue.has_work();
        self.caller_driving.store(false, Ordering::Release);
        drop(state);
        if left_work && let Some(thread) = self.background.get() {
            thread.unpark();
        }
    }
}
