//! Who runs a process set's cycles: a caller waiting on a handle, or the set's background
//! thread.
//!
//! A blocking collective used to cross two hand-offs between threads (submission to the
//! background thread, completion back); on a loaded or virtual machine each costs more
//! than a small collective itself. So a caller that waits on the very submission it just
//! made, before the background thread has taken it, runs the cycles itself until the
//! operation completes. Everything else is the background thread's: asynchronous work,
//! which it overlaps with what the caller does meanwhile (a backward pass; measured,
//! callers that drove such work themselves trained an MLP 9% slower), and the idle
//! cycles the other ranks' negotiation needs. The engine is behind a lock, so one thread
//! at a time steps it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use super::engine::{By, Engine};
use super::queue::Queue;

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
    queue: Arc<Queue>,
    /// Set while a caller drives: the background thread stays out of its way.
    caller_driving: AtomicBool,
    /// Set while the background thread waits for a driving caller to leave: only then
    /// does the caller wake it (a wake-up is a system call, and wakes a thread that
    /// competes for the core).
    background_waiting: AtomicBool,
}

impl Driver {
    pub fn new(engine: Engine, queue: Arc<Queue>) -> Driver {
        Driver {
            state: Mutex::new(Some(Stepper {
                engine,
                started: false,
                busy: false,
                last: By::Background,
            })),
            queue,
            caller_driving: AtomicBool::new(false),
            background_waiting: AtomicBool::new(false),
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
        let mut cycle_time = match self.lock().as_ref() {
            Some(stepper) => stepper.engine.cycle_time(),
            None => return,
        };
        loop {
            if self.caller_driving.load(Ordering::SeqCst) {
                // Until the caller leaves (it wakes this thread) or submits more. The flag
                // is set before the second look, so a caller leaving in between either
                // sees it and wakes this thread, or is seen gone.
                self.background_waiting.store(true, Ordering::SeqCst);
                if self.caller_driving.load(Ordering::SeqCst) {
                    self.queue.wait_for_change(cycle_time);
                }
                self.background_waiting.store(false, Ordering::SeqCst);
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
            // Let a burst finish arriving; a caller that just submitted may wait on that
            // submission now, and drive.
            self.queue.settle(cycle_time);
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

    /// Counts the calling thread as waiting on a handle (see [`Queue::settle`]).
    pub fn caller_waits(&self) -> super::queue::Waiting<'_> {
        self.queue.caller_waits()
    }

    /// Runs cycles on the calling thread until `done` holds, when `submission` is this
    /// set's newest and still queued, and no other thread runs them; otherwise leaves the
    /// caller to wait as before.
    pub fn drive_until(&self, submission: u64, done: impl Fn() -> bool) {
        if self.queue.newest_queued() != submission
            || done()
            || self.caller_driving.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let Some(mut state) = self.try_lock() else {
            self.stop_driving();
            return;
        };
        while !done() && Self::step(&mut state, By::Caller) {}
        drop(state);
        self.stop_driving();
    }

    /// Hands the engine back to the background thread, waking it if it waits for that.
    fn stop_driving(&self) {
        self.caller_driving.store(false, Ordering::SeqCst);
        if self.background_waiting.load(Ordering::SeqCst) {
            self.queue.nudge();
        }
    }
}
