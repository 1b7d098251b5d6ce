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

/// The error of an MPI call made while setting MPI up (before this process knows its
/// rank, or outside any tensor's operation).
pub(crate) fn setup_error(call: &str, code: c_int) -> Error {
    Error::Io {
        context: format!("setting up MPI failed in {call}"),
        message: describe(code),
        kind: std::io::ErrorKind::Other,
    }
}

/// MPI's own text for an error code, when MPI can give it: Open MPI aborts the process
/// if asked before MPI_Init or after MPI_Finalize, so then only the code.
pub(crate) fn describe(code: c_int) -> String {
    let (mut initialized, mut finalized): (c_int, c_int) = (0, 0);
    // SAFETY: both queries may be called at any time, before MPI_Init and after
    // MPI_Finalize; they write one integer each.
    let usable = unsafe {
        ffi::MPI_Initialized(&mut initialized) == 0
            && ffi::MPI_Finalized(&mut finalized) == 0
            && initialized != 0
            && finalized == 0
    };
    if !usable {
        return format!("MPI error code {code}");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &[u8]) -> Vec<c_char> {
        s.iter().map(|b| *b as c_char).collect()
    }

    #[test]
    fn mpi_text_stops_at_its_length_or_its_terminator() {
        let text = chars(b"MPI_ERR_TRUNCATE: message truncated\0junk");
        assert_eq!(c_text(&text, 35), "MPI_ERR_TRUNCATE: message truncated");
        // A library that counts the terminator, or claims more than the buffer holds.
        assert_eq!(c_text(&text, 36), "MPI_ERR_TRUNCATE: message truncated");
        assert_eq!(c_text(&text, 1000), "MPI_ERR_TRUNCATE: message truncated");
        assert_eq!(c_text(&text, -1), "");
    }

    #[test]
    fn set_up_failures_name_the_call_not_a_tensor() {
        // MPI is not initialised in unit tests: the code alone, and no abort.
        assert_eq!(
            setup_error("MPI_Comm_dup", 12345).to_string(),
            "setting up MPI failed in MPI_Comm_dup: MPI error code 12345"
        );
    }
}
