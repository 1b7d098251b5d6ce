//! One MPI communicator owned by hvd: every call on it goes through [`Comm::call`], which
//! checks the return code, serialises where the library needs it, and registers the call
//! with the watchdog.

use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Mutex};

use hvd_core::{Error, Result};
use mpi::ffi;

use crate::error::{mpi_error, setup_error};
use crate::library::Library;
use crate::watchdog::Watch;

unsafe extern "C" {
    /// `MPI_IN_PLACE`, from the C shim (its value differs between MPI implementations).
    fn hvd_mpi_in_place() -> *mut c_void;
}

/// The `MPI_IN_PLACE` marker of this MPI library.
pub(crate) fn in_place() -> *const c_void {
    // SAFETY: the shim only returns a constant.
    unsafe { hvd_mpi_in_place() }
}

/// Where an empty buffer points: an empty slice's pointer is a dangling address such as
/// 0x1, which Open MPI would take for `MPI_IN_PLACE`.
static EMPTY: [u64; 1] = [0];

/// The address MPI gets for `bytes`.
pub(crate) fn address(bytes: &[u8]) -> *const c_void {
    if bytes.is_empty() {
        EMPTY.as_ptr().cast()
    } else {
        bytes.as_ptr().cast()
    }
}

/// The address MPI gets for `bytes` to write into (nothing is written to an empty one).
pub(crate) fn address_mut(bytes: &mut [u8]) -> *mut c_void {
    if bytes.is_empty() {
        EMPTY.as_ptr().cast_mut().cast()
    } else {
        bytes.as_mut_ptr().cast()
    }
}

/// An MPI communicator, freed on drop (before the library can be finalised).
pub(crate) struct Comm {
    handle: ffi::MPI_Comm,
    pub rank: usize,
    pub size: usize,
    /// One call at a time on this communicator: MPI requires every rank to make its
    /// collective calls on a communicator in the same order, which concurrent callers
    /// could not guarantee.
    calls: Mutex<()>,
    pub watch: Arc<Watch>,
    pub library: Arc<Library>,
}

// SAFETY: the handle is only used through `call` (or at drop), which holds the
// communicator's lock and, where the library provides less than MPI_THREAD_MULTIPLE, the
// process-wide lock, so MPI sees calls from several threads only as its thread level allows.
unsafe impl Send for Comm {}
// SAFETY: as for Send.
unsafe impl Sync for Comm {}

impl Comm {
    /// Takes ownership of `handle` (a communicator this process created), and sets it to
    /// return errors instead of aborting.
    pub fn adopt(
        handle: ffi::MPI_Comm,
        library: Arc<Library>,
        timeout: std::time::Duration,
    ) -> Result<Comm> {
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        let codes = {
            let _serial = library.serialize();
            // SAFETY: `handle` is a valid communicator; the outputs are plain integers.
            unsafe {
                [
                    ffi::MPI_Comm_set_errhandler(handle, ffi::RSMPI_ERRORS_RETURN),
                    ffi::MPI_Comm_rank(handle, &mut rank),
                    ffi::MPI_Comm_size(handle, &mut size),
                ]
            }
        };
        let rank = usize::try_from(rank).unwrap_or(0);
        let comm = Comm {
            handle,
            rank,
            size: usize::try_from(size).unwrap_or(0),
            calls: Mutex::new(()),
            watch: Watch::register(rank, timeout)?,
            library,
        };
        for (code, call) in
            codes
                .into_iter()
                .zip(["MPI_Comm_set_errhandler", "MPI_Comm_rank", "MPI_Comm_size"])
        {
            if code != 0 {
                return Err(setup_error(call, code));
            }
        }
        Ok(comm)
    }

    /// Runs one MPI call on this communicator as part of `op` of `tensor`; a non-zero
    /// return code becomes an error naming the rank, the operation, the tensor and the
    /// MPI function.
    pub fn call(
        &self,
        op: &'static str,
        tensor: &str,
        function: &'static str,
        body: impl FnOnce(ffi::MPI_Comm) -> c_int,
    ) -> Result<()> {
        let _order = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let _running = self.watch.begin(op, tensor);
        let _serial = self.library.serialize();
        match body(self.handle) {
            0 => Ok(()),
            code => Err(mpi_error(self.rank, op, tensor, function, code)),
        }
    }

    /// Creates a communicator of the ranks that pass the same `color` (others pass
    /// `None` and get `None`), ordered by `key`. Collective over this communicator.
    pub fn split(&self, color: Option<c_int>, key: c_int) -> Result<Option<Comm>> {
        // SAFETY: a handle is a pointer or an integer (by implementation), for which zero
        // is valid; MPI_Comm_split overwrites it.
        let mut new: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        // SAFETY: reading a predefined constant.
        let undefined = unsafe { ffi::RSMPI_UNDEFINED };
        self.call("split", "process set", "MPI_Comm_split", |comm| {
            // SAFETY: valid communicator; `new` receives the result.
            unsafe { ffi::MPI_Comm_split(comm, color.unwrap_or(undefined), key, &mut new) }
        })?;
        // SAFETY: reading a predefined constant.
        if new == unsafe { ffi::RSMPI_COMM_NULL } {
            return Ok(None);
        }
        let timeout = self.watch.timeout();
        Comm::adopt(new, self.library.clone(), timeout).map(Some)
    }

    /// The host index of every rank: ranks that share memory share a host.
    pub fn hosts(&self) -> Result<Vec<u32>> {
        let op = "connect";
        // SAFETY: as in `split`.
        let mut local: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        let key = self.rank as c_int;
        self.call(op, "hosts", "MPI_Comm_split_type", |comm| {
            // SAFETY: valid communicator; predefined constants; `local` receives the result.
            unsafe {
                ffi::MPI_Comm_split_type(
                    comm,
                    ffi::RSMPI_COMM_TYPE_SHARED,
                    key,
                    ffi::RSMPI_INFO_NULL,
                    &mut local,
                )
            }
        })?;
        let local = Comm::adopt(local, self.library.clone(), self.watch.timeout())?;
        // Each host is named by the lowest rank on it.
        let mine = key;
        let mut leader: c_int = 0;
        local.call(op, "hosts", "MPI_Allreduce", |comm| {
            // SAFETY: one int in, one int out, a predefined type and op.
            unsafe {
                ffi::MPI_Allreduce(
                    (&mine as *const c_int).cast(),
                    (&mut leader as *mut c_int).cast(),
                    1,
                    ffi::RSMPI_INT32_T,
                    ffi::RSMPI_MIN,
                    comm,
                )
            }
        })?;
        let mut leaders = vec![0 as c_int; self.size];
        self.call(op, "hosts", "MPI_Allgather", |comm| {
            // SAFETY: one int from each rank into `size` ints.
            unsafe {
                ffi::MPI_Allgather(
                    (&leader as *const c_int).cast(),
                    1,
                    ffi::RSMPI_INT32_T,
                    leaders.as_mut_ptr().cast(),
                    1,
                    ffi::RSMPI_INT32_T,
                    comm,
                )
            }
        })?;
        let mut names: Vec<c_int> = Vec::new();
        Ok(leaders
            .into_iter()
            .map(|l| match names.iter().position(|n| *n == l) {
                Some(i) => i as u32,
                None => {
                    names.push(l);
                    (names.len() - 1) as u32
                }
            })
            .collect())
    }

    /// Checks that a count fits MPI's `int` counts.
    pub fn count(&self, op: &'static str, tensor: &str, elements: usize) -> Result<c_int> {
        c_int::try_from(elements).map_err(|_| {
            Error::invalid(
                self.rank,
                op,
                tensor,
                format!(
                    "{elements} elements exceed MPI's 32-bit counts (at most {} per call)",
                    c_int::MAX
                ),
            )
        })
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        let _serial = self.library.serialize();
        // SAFETY: hvd created this communicator and no call uses it any more.
        let code = unsafe { ffi::MPI_Comm_free(&mut self.handle) };
        if code != 0 {
            tracing::warn!(
                rank = self.rank,
                "MPI_Comm_free failed: {}",
                crate::error::describe(code)
            );
        }
    }
}
