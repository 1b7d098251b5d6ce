//! Devices and their primary contexts, current per thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::stream::Stream;
use super::{CuResult, INVALID_CONTEXT, NOT_INITIALIZED};
use crate::config::settings;

/// Context handles are this plus 16 times the device ordinal.
const HANDLE_BASE: usize = 0xC0_0000;

static INITIALIZED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The device whose context is current on this thread.
    static CURRENT: Cell<Option<u32>> = const { Cell::new(None) };
}

/// A device's primary context: its streams, the legacy NULL stream among them.
#[derive(Debug)]
pub(crate) struct Context {
    pub ordinal: u32,
    null: OnceLock<Arc<Stream>>,
    streams: Mutex<Vec<Weak<Stream>>>,
}

pub(crate) fn init() {
    INITIALIZED.store(true, Ordering::Release);
}

pub(crate) fn initialized() -> Result<(), CuResult> {
    if INITIALIZED.load(Ordering::Acquire) {
        Ok(())
    } else {
        Err(NOT_INITIALIZED)
    }
}

/// Every device's context, made on first use.
pub(crate) fn contexts() -> &'static [Arc<Context>] {
    static CONTEXTS: OnceLock<Vec<Arc<Context>>> = OnceLock::new();
    CONTEXTS.get_or_init(|| {
        (0..settings().devices)
            .map(|ordinal| {
                Arc::new(Context {
                    ordinal,
                    null: OnceLock::new(),
                    streams: Mutex::new(Vec::new()),
                })
            })
            .collect()
    })
}

pub(crate) fn handle(ordinal: u32) -> usize {
    HANDLE_BASE + 16 * ordinal as usize
}

/// The context of a handle, if it is one.
pub(crate) fn from_handle(handle: usize) -> Option<&'static Arc<Context>> {
    let offset = handle.checked_sub(HANDLE_BASE)?;
    if !offset.is_multiple_of(16) {
        return None;
    }
    contexts().get(offset / 16)
}

/// The context current on this thread, or why there is none.
pub(crate) fn current() -> Result<&'static Arc<Context>, CuResult> {
    initialized()?;
    CURRENT
        .get()
        .and_then(|ordinal| contexts().get(ordinal as usize))
        .ok_or(INVALID_CONTEXT)
}

/// The ordinal of the context current on this thread, if any (no initialisation check).
pub(crate) fn current_ordinal() -> Option<u32> {
    CURRENT.get()
}

pub(crate) fn set_current(context: Option<&Context>) {
    CURRENT.set(context.map(|c| c.ordinal));
}

impl Context {
    /// The legacy NULL stream, started on first use.
    pub(crate) fn null_stream(self: &Arc<Self>) -> Arc<Stream> {
        self.null
            .get_or_init(|| Stream::start(self.ordinal, true, true))
            .clone()
    }

    /// The NULL stream if it was ever used.
    pub(crate) fn null_stream_if_started(&self) -> Option<Arc<Stream>> {
        self.null.get().cloned()
    }

    pub(crate) fn register(&self, stream: &Arc<Stream>) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.retain(|s| s.strong_count() > 0);
        streams.push(Arc::downgrade(stream));
    }

    /// The live streams created in this context (not the NULL stream).
    /// Queues `work` on `stream` after the tasks in `after` and, as CUDA's legacy NULL
    /// stream requires, after the NULL stream's queued work (for a blocking stream) or
    /// every blocking stream's (for the NULL stream). Returns the task's sequence number.
    pub(crate) fn enqueue(
        &self,
        stream: &Arc<Stream>,
        mut after: Vec<(Arc<Stream>, u64)>,
        work: impl FnOnce() + Send + 'static,
    ) -> u64 {
        if stream.is_null {
            after.extend(self.streams().into_iter().filter(|s| s.blocking).map(|s| {
                let seq = s.enqueued();
                (s, seq)
            }));
        } else if stream.blocking
            && let Some(null) = self.null_stream_if_started()
        {
            let seq = null.enqueued();
            after.push((null, seq));
        }
        stream.enqueue_after(after, work)
    }

    pub(crate) fn streams(&self) -> Vec<Arc<Stream>> {
        let streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.iter().filter_map(Weak::upgrade).collect()
    }

    /// Waits until every task queued so far on any stream of the device has run, as
    /// `cuCtxSynchronize` and `cuMemFree` do.
    pub(crate) fn synchronize(&self) {
        let streams = self
            .streams()
            .into_iter()
            .chain(self.null_stream_if_started());
        let marks: Vec<(Arc<Stream>, u64)> = streams
            .map(|s| {
                let seq = s.enqueued();
                (s, seq)
            })
            .collect();
        for (stream, seq) in marks {
            stream.wait_for(seq);
        }
    }
}
