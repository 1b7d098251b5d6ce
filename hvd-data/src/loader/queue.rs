//! What the decode threads and the training loop share: the free buffers, the filled ones
//! by step, and the next step to claim. A thread claims a step only once it holds a free
//! buffer, so the step the loop waits for is always being filled: no deadlock, and at
//! most as many steps ahead as there are buffers.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::buffer::BatchBuffer;
use crate::{Error, Result};

/// How long a wait lasts before it looks again at what changed; it bounds the time
/// a missed wake-up could cost.
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(crate) struct Queue {
    state: Mutex<State>,
    /// A buffer was freed, or the epoch is stopping.
    freed: Condvar,
    /// A step was filled, or a thread exited.
    filled: Condvar,
    /// The loader's buffers between epochs: where they go once the epoch is over.
    home: Arc<Mutex<Vec<BatchBuffer>>>,
}

#[derive(Debug)]
struct State {
    free: Vec<BatchBuffer>,
    done: BTreeMap<usize, Result<BatchBuffer>>,
    next_claim: usize,
    steps: usize,
    running: usize,
    stop: bool,
    /// The buffers went home: one given back later (a batch that outlived its epoch)
    /// follows them.
    drained: bool,
}

impl Queue {
    pub fn new(
        buffers: Vec<BatchBuffer>,
        steps: usize,
        threads: usize,
        home: Arc<Mutex<Vec<BatchBuffer>>>,
    ) -> Self {
        Queue {
            state: Mutex::new(State {
                free: buffers,
                done: BTreeMap::new(),
                next_claim: 0,
                steps,
                running: threads,
                stop: false,
                drained: false,
            }),
            freed: Condvar::new(),
            filled: Condvar::new(),
            home,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A thread that panicked holding the lock left the state whole (every change is
        // one statement), so carry on with it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next step to fill and a buffer for it; `None` when there is none left or the
    /// epoch is stopping.
    pub fn claim(&self) -> Option<(usize, BatchBuffer)> {
        let mut state = self.lock();
        loop {
            if state.stop || state.next_claim >= state.steps {
                return None;
            }
            if let Some(buffer) = state.free.pop() {
                let step = state.next_claim;
                state.next_claim += 1;
                return Some((step, buffer));
            }
            state = self
                .freed
                .wait_timeout(state, POLL)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Hands over step `step`: its filled buffer, or the error that stopped it (the
    /// buffer goes back to the free ones).
    pub fn finish(&self, step: usize, filled: Result<BatchBuffer, (BatchBuffer, Error)>) {
        let mut state = self.lock();
        let entry = match filled {
            Ok(buffer) => Ok(buffer),
            Err((buffer, error)) => {
                state.free.push(buffer);
                self.freed.notify_one();
                Err(error)
            }
        };
        state.done.insert(step, entry);
        self.filled.notify_all();
    }

    pub fn give_back(&self, buffer: BatchBuffer) {
        let mut state = self.lock();
        if state.drained {
            drop(state);
            self.home_buffers().push(buffer);
        } else {
            state.free.push(buffer);
            self.freed.notify_one();
        }
    }

    fn home_buffers(&self) -> MutexGuard<'_, Vec<BatchBuffer>> {
        self.home.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A decode thread ends (normally or by a panic).
    pub fn exited(&self) {
        self.lock().running -= 1;
        self.filled.notify_all();
    }

    pub fn is_stopping(&self) -> bool {
        self.lock().stop
    }

    /// Waits for step `step` of rank `rank`'s epoch, at most `timeout`.
    pub fn take(&self, rank: usize, step: usize, timeout: Duration) -> Result<BatchBuffer> {
        // Loader::new bounds the timeout; a deadline past the clock's end is never.
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.lock();
        loop {
            if let Some(filled) = state.done.remove(&step) {
                return filled;
            }
            if state.running == 0 {
                return Err(Error::Config {
                    name: "loader",
                    reason: format!("the decode threads exited before step {step} was filled"),
                });
            }
            let now = Instant::now();
            let left = deadline.map_or(POLL, |d| d.saturating_duration_since(now));
            if left.is_zero() {
                return Err(Error::Timeout {
                    rank,
                    step,
                    seconds: timeout.as_secs_f64(),
                });
            }
            state = self
                .filled
                .wait_timeout(state, POLL.min(left))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Tells the threads to stop after the sample they are on.
    pub fn stop(&self) {
        self.lock().stop = true;
        self.freed.notify_all();
    }

    /// Sends every buffer home, once the threads have stopped, for the next epoch.
    pub fn drain(&self) {
        let mut state = self.lock();
        state.drained = true;
        let mut buffers = std::mem::take(&mut state.free);
        let done = std::mem::take(&mut state.done);
        buffers.extend(done.into_values().filter_map(Result::ok));
        drop(state);
        self.home_buffers().extend(buffers);
    }
}
