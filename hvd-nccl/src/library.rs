//! libnccl, loaded with `dlopen` on first use: the entry points hvd calls, with the C
//! signatures of nccl.h.

use std::ffi::{CStr, c_char, c_int, c_void};

use hvd_core::dynlib::{Loaded, missing_symbol, open_library};
use hvd_core::{Error, Result};

/// Overrides the library to load (a path or a name).
pub const LIBRARY_VAR: &str = "HVD_NCCL_LIBRARY";

/// Names tried in order when [`LIBRARY_VAR`] is unset.
pub(crate) const NAMES: &[&str] = &["libnccl.so.2", "libnccl.so"];

const INSTALL_HINT: &str = "install NCCL (`apt-get install libnccl2`, or `pip install \
     nvidia-nccl-cu12` and set HVD_NCCL_LIBRARY to the wheel's lib/libnccl.so.2)";

/// The oldest NCCL hvd runs on: `ncclCommSplit` and non-blocking communicators.
pub const MINIMUM: Version = Version {
    major: 2,
    minor: 18,
    patch: 0,
};

/// `ncclComm_t`.
pub(crate) type Comm = *mut c_void;
/// `cudaStream_t` (the same handle as the driver's `CUstream`).
pub(crate) type Stream = *mut c_void;

/// `ncclUniqueId`: passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UniqueId {
    pub internal: [c_char; 128],
}

/// The leading fields of `ncclConfig_t`, as NCCL 2.14 defined them. NCCL copies as many
/// bytes as `size` says and gives later fields their defaults for an older `version`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Config {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
    /// Not ours to set: `NCCL_CONFIG_UNDEF_INT`, and its presence keeps padding out.
    cga_cluster_size: c_int,
}

impl Config {
    /// A config for a non-blocking communicator, everything else NCCL's default.
    pub(crate) fn non_blocking() -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: 0xcafe_beef,
            version: 21400,
            blocking: 0,
            cga_cluster_size: c_int::MIN,
        }
    }
}

pub(crate) const SUCCESS: c_int = 0;
pub(crate) const IN_PROGRESS: c_int = 7;
/// `NCCL_SPLIT_NOCOLOR`.
pub(crate) const SPLIT_NOCOLOR: c_int = -1;
/// `ncclScalarHostImmediate`.
pub(crate) const SCALAR_HOST_IMMEDIATE: c_int = 1;

type Status = c_int;

/// NCCL's version, as `ncclGetVersion` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// Decodes `ncclGetVersion`'s number: `major*10000 + minor*100 + patch` since 2.9,
    /// `major*1000 + minor*100 + patch` before.
    pub fn from_code(code: u32) -> Version {
        let (major, rest) = if code >= 10000 {
            (code / 10000, code % 10000)
        } else {
            (code / 1000, code % 1000)
        };
        Version {
            major,
            minor: rest / 100,
            patch: rest % 100,
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The entry points of the loaded library; it is never unloaded.
#[derive(Debug)]
pub(crate) struct Nccl {
    pub name: String,
    pub version: Version,
    get_error_string: unsafe extern "C" fn(Status) -> *const c_char,
    get_last_error: unsafe extern "C" fn(Comm) -> *const c_char,
    pub get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> Status,
    pub comm_init_rank_config:
        unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int, *mut Config) -> Status,
    pub comm_split: unsafe extern "C" fn(Comm, c_int, c_int, *mut Comm, *mut Config) -> Status,
    pub comm_get_async_error: unsafe extern "C" fn(Comm, *mut Status) -> Status,
    pub comm_abort: unsafe extern "C" fn(Comm) -> Status,
    pub comm_destroy: unsafe extern "C" fn(Comm) -> Status,
    pub comm_count: unsafe extern "C" fn(Comm, *mut c_int) -> Status,
    pub all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        Stream,
    ) -> Status,
    pub broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        Stream,
    ) -> Status,
    pub reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        c_int,
        Comm,
        Stream,
    ) -> Status,
    pub all_gather:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> Status,
    pub reduce_scatter: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        Stream,
    ) -> Status,
    pub send: unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, Stream) -> Status,
    pub recv: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, Stream) -> Status,
    pub group_start: unsafe extern "C" fn() -> Status,
    pub group_end: unsafe extern "C" fn() -> Status,
    pub red_op_create_pre_mul_sum:
        unsafe extern "C" fn(*mut c_int, *mut c_void, c_int, c_int, Comm) -> Status,
    pub red_op_destroy: unsafe extern "C" fn(c_int, Comm) -> Status,
}

/// The NCCL loaded from the first of `candidates` that loads, once per list of
/// candidates; a failure is remembered and returned to every caller.
pub(crate) fn load(candidates: &[String]) -> Result<&'static Nccl> {
    static LOADED: Loaded<Nccl> = Loaded::new();
    LOADED.get(candidates, open)
}

fn open(candidates: &[String]) -> Result<Nccl> {
    let (library, name) = open_library(candidates, "NCCL", INSTALL_HINT)?;
    let too_old = format!("older than {MINIMUM}");
    let missing = |symbol: &CStr| missing_symbol("NCCL", name, symbol, &too_old, INSTALL_HINT);
    macro_rules! bind {
        ($symbol:literal) => {
            // SAFETY: the symbol is NCCL's exported function of that name, whose C
            // signature (nccl.h) the field's type repeats.
            unsafe { library.function($symbol) }.ok_or_else(|| missing($symbol))?
        };
    }
    let get_version: unsafe extern "C" fn(*mut c_int) -> Status = bind!(c"ncclGetVersion");
    let get_error_string: unsafe extern "C" fn(Status) -> *const c_char =
        bind!(c"ncclGetErrorString");
    let mut code: c_int = 0;
    // SAFETY: ncclGetVersion writes one int.
    let status = unsafe { get_version(&mut code) };
    if status != SUCCESS {
        return Err(Error::LibraryMissing {
            library: format!("NCCL ({name})"),
            hint: format!(
                "ncclGetVersion failed: {}",
                error_text(get_error_string, status)
            ),
        });
    }
    let version = Version::from_code(u32::try_from(code).unwrap_or(0));
    if version < MINIMUM {
        return Err(Error::LibraryMissing {
            library: format!("NCCL {MINIMUM} or newer ({name})"),
            hint: format!(
                "the loaded library is NCCL {version}, which lacks ncclCommSplit; {INSTALL_HINT}"
            ),
        });
    }
    Ok(Nccl {
        name: name.to_owned(),
        version,
        get_error_string,
        get_last_error: bind!(c"ncclGetLastError"),
        get_unique_id: bind!(c"ncclGetUniqueId"),
        comm_init_rank_config: bind!(c"ncclCommInitRankConfig"),
        comm_split: bind!(c"ncclCommSplit"),
        comm_get_async_error: bind!(c"ncclCommGetAsyncError"),
        comm_abort: bind!(c"ncclCommAbort"),
        comm_destroy: bind!(c"ncclCommDestroy"),
        comm_count: bind!(c"ncclCommCount"),
        all_reduce: bind!(c"ncclAllReduce"),
        broadcast: bind!(c"ncclBroadcast"),
        reduce: bind!(c"ncclReduce"),
        all_gather: bind!(c"ncclAllGather"),
        reduce_scatter: bind!(c"ncclReduceScatter"),
        send: bind!(c"ncclSend"),
        recv: bind!(c"ncclRecv"),
        group_start: bind!(c"ncclGroupStart"),
        group_end: bind!(c"ncclGroupEnd"),
        red_op_create_pre_mul_sum: bind!(c"ncclRedOpCreatePreMulSum"),
        red_op_destroy: bind!(c"ncclRedOpDestroy"),
    })
}

fn error_text(
    get_error_string: unsafe extern "C" fn(Status) -> *const c_char,
    code: Status,
) -> String {
    // SAFETY: ncclGetErrorString accepts any code and returns a static C string.
    let text = unsafe { get_error_string(code) };
    if text.is_null() {
        return format!("NCCL error {code}");
    }
    // SAFETY: non-null static C string, see above.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    format!("{text} (NCCL error {code})")
}

impl Nccl {
    /// NCCL's words for a result code, with the communicator's last error when it says
    /// more.
    pub(crate) fn describe(&self, code: Status, comm: Comm) -> String {
        let mut text = error_text(self.get_error_string, code);
        // SAFETY: ncclGetLastError takes any communicator (or null) and returns a C
        // string valid until its next error.
        let last = unsafe { (self.get_last_error)(comm) };
        if !last.is_null() {
            // SAFETY: non-null C string, see above.
            let last = unsafe { CStr::from_ptr(last) }.to_string_lossy();
            if !last.trim().is_empty() {
                text.push_str(": ");
                text.push_str(last.trim());
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_decode_in_both_of_ncclgetversions_schemes() {
        let v = Version::from_code(22809);
        assert_eq!((v.major, v.minor, v.patch), (2, 28, 9));
        assert_eq!(v.to_string(), "2.28.9");
        assert_eq!(Version::from_code(2804).to_string(), "2.8.4");
        assert!(Version::from_code(21203) < MINIMUM && Version::from_code(21800) >= MINIMUM);
    }

    #[test]
    fn the_config_is_the_prefix_nccl_2_14_defined() {
        assert_eq!(std::mem::size_of::<Config>(), 24);
        assert_eq!(std::mem::offset_of!(Config, blocking), 16);
    }
}
