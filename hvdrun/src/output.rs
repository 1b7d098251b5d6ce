//! Where each rank's standard output and standard error go.
//!
//! Every piped stream has a reader thread that copies it line by line, so lines of
//! different ranks never interleave mid-line, and that keeps the last lines of standard
//! error for the failure summary.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use hvd_core::{Error, Result};

/// How many lines of a rank's standard error a failure summary shows.
pub const TAIL_LINES: usize = 10;

/// Where the ranks' output goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Output {
    /// Copied as is to this process's standard output and standard error.
    #[default]
    Plain,
    /// Every line tagged with its rank and stream, as `mpirun --tag-output` does:
    /// `[1]<stdout>: text`, `[1]<stderr>: text`.
    Tagged,
    /// Written to `DIR/rank.N/stdout` and `DIR/rank.N/stderr`.
    Files(PathBuf),
}

/// The stream a pipe carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// The last lines a rank wrote to standard error.
pub(crate) type Tail = Arc<Mutex<VecDeque<String>>>;

enum Sink {
    Terminal { stream: Stream, tag: Option<String> },
    File(File),
}

impl Sink {
    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        let newline: &[u8] = if line.ends_with(b"\n") { b"" } else { b"\n" };
        match self {
            Sink::Terminal { stream, tag } => {
                let mut out: Box<dyn Write> = match stream {
                    Stream::Stdout => Box::new(std::io::stdout().lock()),
                    Stream::Stderr => Box::new(std::io::stderr().lock()),
                };
                // One write per line under the lock keeps lines of different ranks whole.
                let mut buf = Vec::with_capacity(line.len() + 24);
                if let Some(tag) = tag {
                    buf.extend_from_slice(tag.as_bytes());
                }
                buf.extend_from_slice(line);
                buf.extend_from_slice(newline);
                out.write_all(&buf)?;
                out.flush()
            }
            Sink::File(file) => {
                file.write_all(line)?;
                file.write_all(newline)
            }
        }
    }
}

/// Opens where `stream` of the rank labelled `label` goes (its rank, or an elastic
/// worker's `host:slot`); for [`Output::Files`] creates the file.
fn sink(output: &Output, label: &str, stream: Stream) -> Result<Sink> {
    Ok(match output {
        Output::Plain => Sink::Terminal { stream, tag: None },
        Output::Tagged => Sink::Terminal {
            stream,
            tag: Some(format!("[{label}]<{}>: ", stream.name())),
        },
        Output::Files(dir) => {
            let dir = dir.join(format!("rank.{label}"));
            std::fs::create_dir_all(&dir).map_err(|e| {
                Error::io(
                    format!("creating the output directory {}", dir.display()),
                    &e,
                )
            })?;
            let path = dir.join(stream.name());
            Sink::File(
                File::create(&path)
                    .map_err(|e| Error::io(format!("creating {}", path.display()), &e))?,
            )
        }
    })
}

/// The open destination of one stream, before its reader thread starts.
pub(crate) struct Destination {
    sink: Sink,
    tail: Option<Tail>,
}

impl Destination {
    pub(crate) fn open(
        output: &Output,
        label: &str,
        stream: Stream,
        tail: Option<Tail>,
    ) -> Result<Self> {
        Ok(Destination {
            sink: sink(output, label, stream)?,
            tail,
        })
    }

    /// Copies `pipe` line by line until it ends (a last line without a newline included).
    pub(crate) fn pump(mut self, pipe: impl Read + Send + 'static) -> JoinHandle<()> {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if let Some(tail) = &self.tail {
                    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                    if tail.len() == TAIL_LINES {
                        tail.pop_front();
                    }
                    let text = String::from_utf8_lossy(&line);
                    tail.push_back(text.trim_end_matches(['\n', '\r']).to_string());
                }
                // A closed terminal or full disk must not stop the copy: the pipe has to be
                // drained or the rank would block writing to it.
                let _ = self.sink.write_line(&line);
            }
        })
    }
}
