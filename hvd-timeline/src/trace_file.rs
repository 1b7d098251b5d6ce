//! [`TraceFile`]: rank 0's trace, a JSON array that is valid after every write.

use std::fmt;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use hvd_core::{Error, Result};

use crate::chrome::Layout;
use crate::event::Batch;
use crate::json::List;

const HEAD: &[u8] = b"[\n";
/// Ends the array; every append writes over it and puts it back after the new events.
const TAIL: &[u8] = b"\n]\n";

/// The job's trace file, owned by rank 0: Chrome's JSON array format, one event object per
/// line.
///
/// The file is a complete JSON array from the moment it is created (`[` and `]`, no
/// events). Each batch of events is rendered in memory and written with one positioned
/// write over the closing `]`: a comma, the events, and the `]` again. The file therefore
/// goes from one complete array to the next, and a process killed at any moment leaves a
/// file that parses. Two limits: a kill that lands inside the write of a batch larger than
/// a page can cut that write short (Linux checks for fatal signals between pages), which
/// leaves the last batch truncated (events are one per line: cutting the file after its
/// last complete line, dropping that line's trailing comma and adding `]` repairs it); and a write that fails (a full disk) is
/// undone by truncating back to the last complete array.
pub struct TraceFile {
    path: PathBuf,
    file: File,
    /// Where the closing [`TAIL`] starts.
    body_end: u64,
    has_events: bool,
    layout: Layout,
}

impl TraceFile {
    /// Creates (or truncates) the file at `path` and writes an empty array.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        let mut file = File::create(&path).map_err(|e| io_error("creating", &path, &e))?;
        file.write_all(HEAD)
            .and_then(|()| file.write_all(TAIL))
            .map_err(|e| io_error("writing", &path, &e))?;
        Ok(TraceFile {
            path,
            file,
            body_end: HEAD.len() as u64,
            has_events: false,
            layout: Layout::default(),
        })
    }

    /// Where the trace is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the batches of the ranks, each with its rank, as one write.
    pub(crate) fn append(&mut self, batches: &[(usize, Batch)]) -> Result<()> {
        let mut list = List::default();
        for (rank, batch) in batches {
            self.layout.render(*rank, batch, &mut list);
        }
        if list.len == 0 {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(list.text.len() + 2 + TAIL.len());
        if self.has_events {
            bytes.extend_from_slice(b",\n");
        }
        bytes.extend_from_slice(list.text.as_bytes());
        let body = bytes.len() as u64;
        bytes.extend_from_slice(TAIL);
        if let Err(e) = self.write_at(self.body_end, &bytes) {
            self.restore_tail();
            return Err(io_error("writing", &self.path, &e));
        }
        self.body_end += body;
        self.has_events = true;
        Ok(())
    }

    fn write_at(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.file.seek(SeekFrom::Start(at))?;
        self.file.write_all(bytes)
    }

    /// After a failed append, puts the file back to the last complete array, as far as
    /// the file system lets us; the append's own error is the one reported.
    fn restore_tail(&mut self) {
        let restored = self
            .file
            .set_len(self.body_end)
            .and_then(|()| self.write_at(self.body_end, TAIL));
        if let Err(e) = restored {
            tracing::warn!(
                path = %self.path.display(),
                error = %e,
                "could not restore the end of the timeline file after a failed write"
            );
        }
    }
}

fn io_error(doing: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::io(format!("{doing} the timeline file {}", path.display()), e)
}

impl fmt::Debug for TraceFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceFile")
            .field("path", &self.path)
            .field("bytes", &(self.body_end + TAIL.len() as u64))
            .finish_non_exhaustive()
    }
}
