//! A one-line progress bar on stderr, drawn only when stderr is a terminal (so logs and
//! launchers that capture the output get none of it).

use std::io::{IsTerminal, Write};

const WIDTH: usize = 30;

pub struct Progress {
    enabled: bool,
}

impl Progress {
    /// A bar that draws when `show` is true and stderr is a terminal.
    pub fn new(show: bool) -> Self {
        Progress {
            enabled: show && std::io::stderr().is_terminal(),
        }
    }

    /// Redraws the bar for `done` of `total` steps of `epoch`.
    pub fn update(&self, epoch: usize, done: usize, total: usize, loss: f32) {
        // About 50 redraws an epoch are smooth enough and cost nothing.
        if !self.enabled || (!done.is_multiple_of(total.div_ceil(50).max(1)) && done != total) {
            return;
        }
        let filled = WIDTH * done / total.max(1);
        eprint!(
            "\repoch {epoch:>2} [{}{}] {done}/{total}  loss {loss:.4}",
            "#".repeat(filled),
            " ".repeat(WIDTH - filled)
        );
        let _ = std::io::stderr().flush();
    }

    /// Clears the bar so the epoch's summary line takes its place.
    pub fn clear(&self) {
        if self.enabled {
            eprint!("\r{}\r", " ".repeat(WIDTH + 60));
        }
    }
}
