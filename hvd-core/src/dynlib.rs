//! Native libraries loaded at run time (`dlopen`), so that a machine without one gets a
//! clear [`Error`] from the transport that needs it instead of a link
//! failure, a panic or an abort. What a transport loads stays loaded for the life of the
//! process: drivers and providers keep threads and global state.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_void};
use std::ptr::NonNull;
use std::sync::{Mutex, OnceLock};

use crate::{Error, Result};

/// A library loaded with `dlopen`, never closed.
#[derive(Debug, Clone, Copy)]
pub struct Dynlib {
    handle: NonNull<c_void>,
}

// SAFETY: the handle is only passed to dlsym, which is thread-safe, and is never closed.
unsafe impl Send for Dynlib {}
// SAFETY: as above.
unsafe impl Sync for Dynlib {}

impl Dynlib {
    /// Loads `name` (a file name searched the loader's way, or a path); the error is the
    /// loader's own text.
    pub fn open(name: &str) -> Result<Dynlib, String> {
        let c_name = CString::new(name).map_err(|_| format!("{name:?} contains a NUL byte"))?;
        // SAFETY: `c_name` is a valid C string; dlopen has no other preconditions. It runs
        // the library's constructors, which is what loading it means.
        let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        NonNull::new(handle)
            .map(|handle| Dynlib { handle })
            .ok_or_else(dl_error)
    }

    /// Loads the first of `candidates` that loads, returning it with its name; the error
    /// lists every failure.
    pub fn open_first(candidates: &[String]) -> Result<(Dynlib, &str), Vec<String>> {
        let mut failures = Vec::new();
        for name in candidates {
            match Dynlib::open(name) {
                Ok(library) => return Ok((library, name)),
                Err(reason) => failures.push(reason),
            }
        }
        Err(failures)
    }

    /// The address of `symbol`, or `None` when the library lacks it.
    pub fn symbol(&self, symbol: &CStr) -> Option<NonNull<c_void>> {
        // SAFETY: the handle came from a successful dlopen and is never closed; `symbol`
        // is a valid C string.
        NonNull::new(unsafe { libc::dlsym(self.handle.as_ptr(), symbol.as_ptr()) })
    }

    /// `symbol` as a function pointer of type `F`, or `None` when the library lacks it.
    ///
    /// # Safety
    /// `F` must be an `extern "C"` function pointer type with the symbol's C signature.
    pub unsafe fn function<F: Copy>(&self, symbol: &CStr) -> Option<F> {
        assert_eq!(
            std::mem::size_of::<F>(),
            std::mem::size_of::<*mut c_void>(),
            "a function pointer type"
        );
        let address = self.symbol(symbol)?.as_ptr();
        // SAFETY: `F` is a function pointer of the symbol's signature (the caller's
        // contract) and of the size of the address, which the library keeps loaded.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&address) })
    }
}

/// The names to load: the value of the override variable `var` when it is set and not
/// empty, else `defaults` in order.
pub fn candidates(var: &str, defaults: &[&str]) -> Vec<String> {
    match std::env::var(var) {
        Ok(path) if !path.is_empty() => vec![path],
        _ => defaults.iter().map(|n| n.to_string()).collect(),
    }
}

/// The first of `candidates` that loads, with its name; when none does,
/// [`Error::LibraryMissing`] naming `what` and every candidate, with `install_hint` and
/// the loader's reasons.
pub fn open_library<'c>(
    candidates: &'c [String],
    what: &str,
    install_hint: &str,
) -> Result<(Dynlib, &'c str)> {
    Dynlib::open_first(candidates).map_err(|failures| Error::LibraryMissing {
        library: format!("{what} ({})", candidates.join(", ")),
        hint: format!("{install_hint} ({})", failures.join("; ")),
    })
}

/// The [`Error::LibraryMissing`] of a library `name` that loaded but lacks `symbol`: it
/// is not `what`, or it is `too_old` (e.g. "too old", "older than 2.18").
pub fn missing_symbol(
    what: &str,
    name: &str,
    symbol: &CStr,
    too_old: &str,
    install_hint: &str,
) -> Error {
    Error::LibraryMissing {
        library: format!("{what} ({name})"),
        hint: format!(
            "the library lacks {}: it is not {what}, or {too_old}; {install_hint}",
            symbol.to_string_lossy()
        ),
    }
}

/// A library's bindings, loaded once per list of candidates and kept for the life of the
/// process; a failure is remembered and returned to every later caller alike.
#[derive(Debug)]
pub struct Loaded<T: 'static> {
    by_candidates: OnceLock<Mutex<HashMap<Vec<String>, Result<&'static T>>>>,
}

impl<T: Sync> Loaded<T> {
    /// Nothing loaded yet (for a `static`).
    pub const fn new() -> Self {
        Loaded {
            by_candidates: OnceLock::new(),
        }
    }

    /// The bindings `open` makes from `candidates`, made on the first call for them.
    pub fn get(
        &self,
        candidates: &[String],
        open: impl FnOnce(&[String]) -> Result<T>,
    ) -> Result<&'static T> {
        let mut loaded = self
            .by_candidates
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        loaded
            .entry(candidates.to_vec())
            .or_insert_with(|| open(candidates).map(|bindings| &*Box::leak(Box::new(bindings))))
            .clone()
    }
}

impl<T: Sync> Default for Loaded<T> {
    fn default() -> Self {
        Loaded::new()
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl* call on this
    // thread, and it is copied at once.
    let text = unsafe { libc::dlerror() };
    if text.is_null() {
        return "unknown dlopen error".into();
    }
    // SAFETY: non-null and NUL-terminated, see above.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_the_loaders_text_and_every_candidate_is_listed() {
        let names = vec!["libhvd-none-1.so".to_owned(), "libhvd-none-2.so".to_owned()];
        let failures = Dynlib::open_first(&names).unwrap_err();
        assert_eq!(failures.len(), 2);
        assert!(failures[0].contains("libhvd-none-1.so"), "{failures:?}");
    }

    #[test]
    fn a_library_without_a_symbol_is_named_with_the_symbol_and_what_may_be_wrong() {
        let err = missing_symbol(
            "NCCL",
            "libnccl.so.2",
            c"ncclCommInitRank",
            "older than 2.18",
            "pip install nvidia-nccl-cu12",
        );
        assert_eq!(
            err.to_string(),
            "NCCL (libnccl.so.2) is not available: the library lacks ncclCommInitRank: it is \
             not NCCL, or older than 2.18; pip install nvidia-nccl-cu12"
        );
    }

    #[test]
    fn symbols_of_a_loaded_library_resolve_and_missing_ones_are_none() {
        let names = ["libc.so.6".to_owned()];
        let (libc, name) = Dynlib::open_first(&names).unwrap();
        assert_eq!(name, "libc.so.6");
        assert!(libc.symbol(c"strlen").is_some());
        assert!(libc.symbol(c"hvd_no_such_symbol").is_none());
    }
}
