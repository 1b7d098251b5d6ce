//! MPI's return codes as hvd errors.

use std::os::raw::{c_char, c_int};

use hvd_core::Error;
use mpi::ffi;

/// The error of an MPI call that returned `code` (communicators use
/// `MPI_ERRORS_RETURN`, so failures come back here instead of aborting).
pub(crate) fn mpi_error(rank: usize, op: &str, tensor: &str, call: &str, code: c_int) -> Error {
    Error::Io {
        context: format!("rank {rank}: {op} of tensor '{tensor}' failed in {call}"),
        message: describe(code),
        kind: std::io::ErrorKind::Other,
    }
}

/// MPI's own text for an error code.
pub(crate) fn describe(code: c_int) -> String {
    let mut text = [0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters as the call requires.
    let found = unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr(), &mut len) };
    if found != 0 {
        return format!("MPI error code {code}");
    }
    format!("{} (MPI error code {code})", c_text(&text, len))
}

/// The text MPI wrote into `text`: `len` characters, or up to the first NUL (some
/// libraries count the terminator).
pub(crate) fn c_text(text: &[c_char], len: c_int) -> String {
    let bytes: Vec<u8> = text[..len.clamp(0, text.len() as c_int) as usize]
        .iter()
        .map(|c| *c as u8)
        .take_while(|b| *b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
