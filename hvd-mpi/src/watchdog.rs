//! The deadline of blocking MPI calls.
//!
//! A blocking MPI collective cannot be cancelled, and a rank that never makes the matching
//! call leaves the others blocked for ever. Every call therefore registers here while it
//! runs; a watchdog thread (one per process) ends the job with an error naming the rank,
//! the tensor and the operation once a call has run longer than its timeout, rather than
//! letting it hang silently.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use hvd_core::Error;
use mpi::ffi;

/// How often the watchdog looks; a timeout fires at most this much late.
const PERIOD: Duration = Duration::from_millis(100);

/// The call one communicator is in, if any.
pub(crate) struct Watch {
    rank: usize,
    timeout: Duration,
    current: Mutex<Option<Pending>>,
}

struct Pending {
    op: &'static str,
    tensor: String,
    since: Instant,
}

/// Marks the end of a watched call when dropped.
pub(crate) struct Running<'a>(&'a Watch);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *self.0.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

static WATCHED: Mutex<Vec<Weak<Watch>>> = Mutex::new(Vec::new());
static THREAD: OnceLock<()> = OnceLock::new();

impl Watch {
    /// A watch for the calls of one communicator, checked by the process's watchdog.
    pub fn register(rank: usize, timeout: Duration) -> Arc<Watch> {
        let watch = Arc::new(Watch {
            rank,
            timeout,
            current: Mutex::new(None),
        });
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        watched.retain(|w| w.strong_count() > 0);
        watched.push(Arc::downgrade(&watch));
        THREAD.get_or_init(|| {
            let started = std::thread::Builder::new()
                .name("hvd-mpi-watchdog".into())
                .spawn(watchdog);
            if let Err(e) = started {
                tracing::warn!("could not start the MPI watchdog; MPI calls have no timeout: {e}");
            }
        });
        watch
    }

    /// Marks `op` of `tensor` as running until the returned guard is dropped.
    pub fn begin(&self, op: &'static str, tensor: impl Into<String>) -> Running<'_> {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(Pending {
            op,
            tensor: tensor.into(),
            since: Instant::now(),
        });
        Running(self)
    }

    /// How long one call may run.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The timeout error of the call in progress, once it has run too long.
    fn overdue(&self, now: Instant) -> Option<Error> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let pending = current.as_ref()?;
        (now.duration_since(pending.since) >= self.timeout).then(|| Error::Timeout {
            rank: self.rank,
            op: pending.op,
            tensor: pending.tensor.clone(),
            waited: self.timeout,
            waiting_for: "every rank of the MPI communicator to make the same call (MPI cannot cancel a blocking collective, so the job ends; raise HVD_MPI_TIMEOUT if the call is just slow)".into(),
        })
    }
}

fn watchdog() {
    loop {
        std::thread::sleep(PERIOD);
        let now = Instant::now();
        let overdue = WATCHED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .find_map(|w| w.overdue(now));
        if let Some(error) = overdue {
            tracing::error!("{error}");
            eprintln!("hvd-mpi: {error}");
            // SAFETY: ends every process of the job; MPI allows it from any thread at the
            // thread levels hvd accepts, and nothing of this process runs afterwards.
            unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1) };
            std::process::exit(1);
        }
    }
}
