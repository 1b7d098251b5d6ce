//! The start-up progress line: `name: 3/4 ranks connected`, overwritten in place on a
//! terminal.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use hvd_core::{MemoryStore, Store};
use hvd_rendezvous::CHECKIN_KEY;

use super::spec::Job;

impl Job {
    /// Shows the last count of ranks that checked in and ends the progress line, when a
    /// job ends while it is still shown: a job that ends between two polls still says
    /// how many of its ranks connected.
    pub(super) fn end_progress(&self, watch: Option<&mut CheckinWatch>, store: &MemoryStore) {
        if let Some(watch) = watch {
            watch.show(self.progress.as_deref(), connected(store), self.np);
            watch.finish();
        }
    }
}

/// How many ranks have checked in.
pub(super) fn connected(store: &MemoryStore) -> usize {
    match store.try_get(CHECKIN_KEY) {
        Ok(Some(bytes)) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// The start-up progress line and deadline.
pub(super) struct CheckinWatch {
    pub(super) timeout: Duration,
    shown: usize,
    terminal: bool,
}

impl CheckinWatch {
    pub(super) fn new(timeout: Duration) -> Self {
        CheckinWatch {
            timeout,
            shown: 0,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    pub(super) fn show(&mut self, name: Option<&str>, connected: usize, np: usize) {
        let Some(name) = name else { return };
        if connected == self.shown {
            return;
        }
        self.shown = connected;
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r{name}: {connected}/{np} ranks connected")
        } else {
            writeln!(err, "{name}: {connected}/{np} ranks connected")
        };
        let _ = err.flush();
    }

    /// Ends an overwritten progress line, so what follows starts on a line of its own.
    pub(super) fn finish(&self) {
        if self.terminal && self.shown > 0 {
            eprintln!();
        }
    }
}
