//! Events: a recorded event is a stream and the sequence number of a marker task.

use std::sync::{Arc, Mutex};

use super::stream::Stream;

#[derive(Debug, Default)]
pub(crate) struct Event {
    recorded: Mutex<Option<(Arc<Stream>, u64)>>,
}

impl Event {
    pub(crate) fn record(&self, stream: Arc<Stream>, seq: u64) {
        *self.recorded.lock().unwrap_or_else(|e| e.into_inner()) = Some((stream, seq));
    }

    /// The stream and sequence number of the last record, if any.
    pub(crate) fn mark(&self) -> Option<(Arc<Stream>, u64)> {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the work before the last record has run (an event never recorded has).
    /// Asking counts as waiting for it.
    pub(crate) fn complete(&self) -> bool {
        self.mark().is_none_or(|(stream, seq)| {
            stream.demand(seq);
            stream.completed() >= seq
        })
    }

    pub(crate) fn wait(&self) {
        if let Some((stream, seq)) = self.mark() {
            stream.wait_for(seq);
        }
    }
}
