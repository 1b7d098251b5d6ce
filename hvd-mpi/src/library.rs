//! The MPI library of this process: initialised once, finalised when the last
//! communicator is gone, with the thread level it provides.

use std::os::raw::c_int;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use hvd_core::{Error, Result};
use mpi::ffi;

use crate::error::setup_error;
use crate::user_ops::UserOps;

/// How the calls of several threads reach MPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadLevel {
    /// `MPI_THREAD_MULTIPLE`: every thread calls MPI when it wants to.
    Multiple,
    /// `MPI_THREAD_SERIALIZED`: one call at a time, through a process-wide lock. One
    /// communicator only: blocking collectives of two communicators behind one lock could
    /// deadlock, so `split` is refused.
    Serialized,
}

/// The initialised MPI library, shared by every communicator of this process.
pub(crate) struct Library {
    pub level: ThreadLevel,
    /// Whether hvd initialised MPI (and so finalises it); false when the program had.
    owned: bool,
    serial: Mutex<()>,
    pub ops: UserOps,
}

enum State {
    Unused,
    Live(Weak<Library>),
    Finalized,
}

static STATE: Mutex<State> = Mutex::new(State::Unused);

impl Library {
    /// The library of this process, initialised on first use.
    pub fn get() -> Result<Arc<Library>> {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if let State::Live(weak) = &*state
            && let Some(library) = weak.upgrade()
        {
            return Ok(library);
        }
        if matches!(*state, State::Finalized) || finalized()? {
            return Err(Error::Unsupported {
                backend: "mpi",
                what: "starting again after MPI was finalized: MPI can be initialised once per process, so hvd over MPI starts once per process".into(),
            });
        }
        let library = Arc::new(Library::init()?);
        *state = State::Live(Arc::downgrade(&library));
        Ok(library)
    }

    fn init() -> Result<Library> {
        let mut initialized: c_int = 0;
        // SAFETY: MPI_Initialized may be called at any time, even before MPI_Init.
        let code = unsafe { ffi::MPI_Initialized(&mut initialized) };
        check_init(code, "MPI_Initialized")?;
        let mut provided: c_int = 0;
        let owned = initialized == 0;
        if owned {
            // SAFETY: MPI is not initialised (checked above, under STATE's lock); null
            // argc/argv are allowed by the standard.
            let code = unsafe {
                ffi::MPI_Init_thread(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    ffi::RSMPI_THREAD_MULTIPLE,
                    &mut provided,
                )
            };
            check_init(code, "MPI_Init_thread")?;
            // SAFETY: MPI is initialised; COMM_WORLD and ERRORS_RETURN are predefined.
            let code = unsafe {
                ffi::MPI_Comm_set_errhandler(ffi::RSMPI_COMM_WORLD, ffi::RSMPI_ERRORS_RETURN)
            };
            check_init(code, "MPI_Comm_set_errhandler")?;
        } else {
            // SAFETY: MPI is initialised (by the program).
            let code = unsafe { ffi::MPI_Query_thread(&mut provided) };
            check_init(code, "MPI_Query_thread")?;
        }
        // SAFETY: reading predefined constants of the initialised library.
        let (multiple, serialized) =
            unsafe { (ffi::RSMPI_THREAD_MULTIPLE, ffi::RSMPI_THREAD_SERIALIZED) };
        let level = if provided >= multiple {
            ThreadLevel::Multiple
        } else if provided >= serialized {
            ThreadLevel::Serialized
        } else {
            if owned {
                // SAFETY: we initialised MPI above and nothing else uses it yet.
                unsafe { ffi::MPI_Finalize() };
            }
            return Err(Error::Unsupported {
                backend: "mpi",
                what: format!(
                    "this MPI library's thread level ({provided}): hvd calls MPI from its background threads and needs MPI_THREAD_SERIALIZED ({serialized}) or MPI_THREAD_MULTIPLE ({multiple})"
                ),
            });
        };
        if level == ThreadLevel::Serialized {
            tracing::warn!(
                "this MPI library provides MPI_THREAD_SERIALIZED, not MPI_THREAD_MULTIPLE: hvd serialises its MPI calls and cannot create process sets"
            );
        }
        Ok(Library {
            level,
            owned,
            serial: Mutex::new(()),
            ops: UserOps::create()?,
        })
    }

    /// Holds the process-wide lock while this MPI library needs calls serialised.
    pub fn serialize(&self) -> Option<MutexGuard<'_, ()>> {
        match self.level {
            ThreadLevel::Multiple => None,
            ThreadLevel::Serialized => Some(self.serial.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        self.ops.free();
        if self.owned {
            // SAFETY: the last communicator is gone (each holds an Arc of this library) and
            // hvd initialised MPI, so nothing else of hvd calls MPI again.
            let code = unsafe { ffi::MPI_Finalize() };
            if code != 0 {
                tracing::warn!("MPI_Finalize failed: {}", crate::error::describe(code));
            }
            *state = State::Finalized;
        } else {
            *state = State::Unused;
        }
    }
}

/// The MPI library this process links, as it names itself (its first line), such as
/// `Open MPI v4.1.4, ...`. Callable before MPI is initialised.
pub fn library_version() -> Result<String> {
    let mut text = [0 as std::os::raw::c_char; ffi::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING characters, as the call
    // requires; MPI allows the call before MPI_Init.
    let code = unsafe { ffi::MPI_Get_library_version(text.as_mut_ptr(), &mut len) };
    check_init(code, "MPI_Get_library_version")?;
    let version = crate::error::c_text(&text, len);
    Ok(version
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string())
}

fn finalized() -> Result<bool> {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Finalized may be called at any time.
    let code = unsafe { ffi::MPI_Finalized(&mut flag) };
    check_init(code, "MPI_Finalized")?;
    Ok(flag != 0)
}

fn check_init(code: c_int, call: &str) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(setup_error(call, code))
}
