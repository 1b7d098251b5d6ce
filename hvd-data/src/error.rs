//! The loader's errors: each names the file, and the sample when there is one, so a user
//! can find the bad input in a dataset of millions.

use std::path::PathBuf;

/// What went wrong in a source or the loader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// One sample could not be read, decoded or labelled.
    #[error("sample {index} ({file}): {reason}")]
    Sample {
        index: usize,
        file: String,
        reason: String,
    },
    /// A source could not be opened: a missing folder, an empty or truncated shard.
    #[error("{}: {reason}", path.display())]
    Source { path: PathBuf, reason: String },
    /// A setting out of range.
    #[error("invalid {name}: {reason}")]
    Config { name: &'static str, reason: String },
    /// The decode threads gave no batch within the loader's timeout.
    #[error(
        "rank {rank}: no batch for step {step} within {seconds:.1} s: the decode threads are \
         stuck or far too slow (raise LoaderOptions::timeout if single samples take this \
         long), or the training loop holds every batch buffer (drop batches once used)"
    )]
    Timeout {
        rank: usize,
        step: usize,
        seconds: f64,
    },
    /// The ranks' step times cannot be compared (different step counts, bad values).
    #[error("stall attribution: {0}")]
    Stall(String),
}

/// `Result` with the loader's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn sample(index: usize, file: impl Into<String>, reason: impl ToString) -> Self {
        Error::Sample {
            index,
            file: file.into(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn source(path: impl Into<PathBuf>, reason: impl ToString) -> Self {
        Error::Source {
            path: path.into(),
            reason: reason.to_string(),
        }
    }
}
