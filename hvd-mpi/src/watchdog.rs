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
    current: Mutex<Pending>,
}

/// The call in progress; its tensor name's buffer is reused, so a call allocates nothing
/// once names have been seen.
struct Pending {
    op: &'static str,
    tensor: String,
    /// None between calls.
    since: Option<Instant>,
}

/// Marks the end of a watched call when dropped.
pub(crate) struct Running<'a>(&'a Watch);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .since = None;
    }
}

static WATCHED: Mutex<Vec<Weak<Watch>>> = Mutex::new(Vec::new());
/// Whether the watchdog thread started; without it no call would have a deadline.
static THREAD: OnceLock<Result<(), String>> = OnceLock::new();

impl Watch {
    /// A watch for the calls of one communicator, checked by the process's watchdog; an
    /// error when the watchdog could not be started.
    pub fn register(rank: usize, timeout: Duration) -> Result<Arc<Watch>, Error> {
        let started = THREAD.get_or_init(|| {
            std::thread::Builder::new()
                .name("hvd-mpi-watchdog".into())
                .spawn(watchdog)
                .map(drop)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = started {
            return Err(Error::Io {
                context: format!(
                    "rank {rank}: starting the MPI watchdog, without which MPI calls would have no timeout"
                ),
                message: e.clone(),
                kind: std::io::ErrorKind::Other,
            });
        }
        let watch = Arc::new(Watch {
            rank,
            timeout,
            current: Mutex::new(Pending {
                op: "",
                tensor: String::new(),
                since: None,
            }),
        });
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        watched.retain(|w| w.strong_count() > 0);
        watched.push(Arc::downgrade(&watch));
        Ok(watch)
    }

    /// Marks `op` of `tensor` as running until the returned guard is dropped.
    pub fn begin(&self, op: &'static str, tensor: &str) -> Running<'_> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current.op = op;
        current.tensor.clear();
        current.tensor.push_str(tensor);
        current.since = Some(Instant::now());
        Running(self)
    }

    /// How long one call may run.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The timeout error of the call in progress, once it has run too long.
    fn overdue(&self, now: Instant) -> Option<Error> {
        let pending = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let since = pending.since?;
        (now.duration_since(since) >= self.timeout).then(|| Error::Timeout {
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
            // One write: stderr is unbuffered, so `eprintln!` would write the message in
            // pieces, and the launcher's abort banner lands between them.
            let line = format!("hvd-mpi: {error}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            // SAFETY: ends every process of the job; MPI allows it from any thread at the
            // thread levels hvd accepts, and nothing of this process runs afterwards.
            unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1) };
            std::process::exit(1);
        }
    }
}
