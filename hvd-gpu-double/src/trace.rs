//! The call trace (`HVD_GPU_DOUBLE_TRACE`): one line per entry point called, appended to
//! a file shared by every process of a test.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

use crate::config::settings;

fn file() -> Option<&'static Mutex<File>> {
    static FILE: OnceLock<Option<Mutex<File>>> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = settings().trace.as_ref()?;
        match OpenOptions::new().create(true).append(true).open(path) {
            Ok(file) => Some(Mutex::new(file)),
            Err(e) => {
                eprintln!(
                    "hvd-gpu-double: cannot open the trace {}: {e}",
                    path.display()
                );
                None
            }
        }
    })
    .as_ref()
}

/// Whether calls are traced: arguments are only formatted when they are.
pub(crate) fn on() -> bool {
    file().is_some()
}

/// Appends `<pid> <function> <args>` as one write, so lines of several processes do not
/// interleave.
pub(crate) fn record(function: &str, args: std::fmt::Arguments<'_>) {
    if let Some(file) = file() {
        let line = format!("{} {function} {args}\n", std::process::id());
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = file.write_all(line.as_bytes());
    }
}

/// Traces a call: `trace!("cuMemAlloc_v2", "bytes={}", n)`.
macro_rules! trace {
    ($function:expr) => {
        if $crate::trace::on() {
            $crate::trace::record($function, format_args!(""));
        }
    };
    ($function:expr, $($args:tt)+) => {
        if $crate::trace::on() {
            $crate::trace::record($function, format_args!($($args)+));
        }
    };
}
pub(crate) use trace;
