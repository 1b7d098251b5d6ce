//! hvd's errors as Python exceptions, with hvd's own message.

use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    hvd._hvd,
    HorovodInternalError,
    PyRuntimeError,
    "A collective failed; the message says on which rank, for which tensor, and why."
);
create_exception!(
    hvd._hvd,
    MismatchError,
    HorovodInternalError,
    "Ranks disagreed about a tensor (dtype, shape, op, root) or a control call."
);
create_exception!(
    hvd._hvd,
    RankLostError,
    HorovodInternalError,
    "A rank of the job died, left, or stopped responding."
);
create_exception!(
    hvd._hvd,
    HorovodTimeoutError,
    HorovodInternalError,
    "A wait (barrier, join, process set) ran out of time."
);

/// The Python exception for an hvd error: bad arguments are `ValueError`s, the rest are
/// `HorovodInternalError`s, more precise where the kind of failure is known. Every one
/// carries `recoverable`: whether an elastic job goes on after it (a lost or silent
/// peer, a timeout, a peer's shutdown) or ends (a bug).
pub fn to_py(error: hvd::Error) -> PyErr {
    let recoverable = error.is_recoverable();
    let err = python_error(error);
    // What an elastic job goes on after (hvd.elastic.run reads it), decided once in Rust.
    Python::attach(|py| {
        let _ = err.value(py).setattr("recoverable", recoverable);
    });
    err
}

fn python_error(error: hvd::Error) -> PyErr {
    let message = error.to_string();
    match error {
        hvd::Error::InvalidArgument { .. } | hvd::Error::Config { .. } => {
            PyValueError::new_err(message)
        }
        hvd::Error::Mismatch { .. } | hvd::Error::MismatchedCall { .. } => {
            MismatchError::new_err(message)
        }
        hvd::Error::PeerLost { .. } | hvd::Error::PeerSilent { .. } => {
            RankLostError::new_err(message)
        }
        hvd::Error::Timeout { .. } => HorovodTimeoutError::new_err(message),
        _ => HorovodInternalError::new_err(message),
    }
}
