//! libfabric, loaded with `dlopen` on first use, so that a machine without it gets a
//! clear [`Error`] instead of a link failure.
//!
//! Only the functions `fabric.h` really exports are resolved here; everything else is a
//! call through the function tables of the objects they return (see `sys::calls`).

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use hvd_core::dynlib::{self, Dynlib};
use hvd_core::{Error, Result};

use crate::sys::{self, fi_fabric_attr, fi_info, fid_fabric};

/// Names tried in order when `HVD_LIBFABRIC_LIBRARY` is unset.
const NAMES: &[&str] = &["libfabric.so.1", "libfabric.so"];

/// Overrides the library to load (a path or a name).
pub(crate) const LIBRARY_VAR: &str = "HVD_LIBFABRIC_LIBRARY";

const INSTALL_HINT: &str = "install it with `apt-get install libfabric1` (Debian, Ubuntu) or \
     `yum install libfabric` (RHEL, Fedora), or set HVD_LIBFABRIC_LIBRARY to its path";

type GetInfo = unsafe extern "C" fn(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int;
type FreeInfo = unsafe extern "C" fn(info: *mut fi_info);
type DupInfo = unsafe extern "C" fn(info: *const fi_info) -> *mut fi_info;
type Fabric = unsafe extern "C" fn(
    attr: *mut fi_fabric_attr,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int;
type StrError = unsafe extern "C" fn(errnum: c_int) -> *const c_char;
type Version = unsafe extern "C" fn() -> u32;

/// The loaded library's entry points. The library is never unloaded: providers keep
/// threads and global state alive for the life of the process.
#[derive(Debug)]
pub(crate) struct Library {
    /// What was loaded, for messages.
    pub name: String,
    pub getinfo: GetInfo,
    pub freeinfo: FreeInfo,
    pub dupinfo: DupInfo,
    pub fabric: Fabric,
    strerror: StrError,
    version: Version,
}

/// The process's libfabric, loaded on first use; a failure is remembered and returned to
/// every caller.
pub(crate) fn library() -> Result<&'static Library> {
    static LIBRARY: OnceLock<Result<Library>> = OnceLock::new();
    LIBRARY.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Library> {
    let candidates = dynlib::candidates(LIBRARY_VAR, NAMES);
    let (library, name) = dynlib::open_library(&candidates, "libfabric", INSTALL_HINT)?;
    resolve(name, library)
}

fn symbol(name: &str, library: Dynlib, symbol: &CStr) -> Result<*mut c_void> {
    let address = library.symbol(symbol).ok_or_else(|| {
        let too_old = "too old (hvd-rdma needs 1.17 or later)";
        dynlib::missing_symbol("libfabric", name, symbol, too_old, INSTALL_HINT)
    })?;
    Ok(address.as_ptr())
}

fn resolve(name: &str, library: Dynlib) -> Result<Library> {
    let find = |s: &CStr| symbol(name, library, s);
    // SAFETY: each symbol is libfabric's exported function of that name, whose C
    // signature (fabric.h) the target type repeats; the library stays loaded forever.
    let library = unsafe {
        Library {
            name: name.to_owned(),
            getinfo: std::mem::transmute::<*mut c_void, GetInfo>(find(c"fi_getinfo")?),
            freeinfo: std::mem::transmute::<*mut c_void, FreeInfo>(find(c"fi_freeinfo")?),
            dupinfo: std::mem::transmute::<*mut c_void, DupInfo>(find(c"fi_dupinfo")?),
            fabric: std::mem::transmute::<*mut c_void, Fabric>(find(c"fi_fabric")?),
            strerror: std::mem::transmute::<*mut c_void, StrError>(find(c"fi_strerror")?),
            version: std::mem::transmute::<*mut c_void, Version>(find(c"fi_version")?),
        }
    };
    let version = library.version();
    if version < sys::API_VERSION {
        return Err(Error::LibraryMissing {
            library: format!("libfabric 1.17 or later ({name})"),
            hint: format!(
                "the loaded library is version {}.{}; {INSTALL_HINT}",
                version >> 16,
                version & 0xffff
            ),
        });
    }
    Ok(library)
}

impl Library {
    /// libfabric's own text for a (negative or positive) error code.
    pub(crate) fn strerror(&self, code: i64) -> String {
        let code = c_int::try_from(code.unsigned_abs()).unwrap_or(c_int::MAX);
        // SAFETY: fi_strerror accepts any positive code and returns a static C string.
        let text = unsafe { (self.strerror)(code) };
        if text.is_null() {
            return format!("libfabric error {code}");
        }
        // SAFETY: non-null static C string, see above.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{text} (-{code})")
    }

    /// The library's API version, `FI_VERSION(major, minor)`.
    pub(crate) fn version(&self) -> u32 {
        // SAFETY: fi_version takes nothing and only returns a constant.
        unsafe { (self.version)() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_that_is_not_there_names_itself_and_the_package() {
        let failure = Dynlib::open("libhvd-no-such-fabric.so.1").map(|_| ());
        let reason = failure.err().unwrap_or_default();
        assert!(reason.contains("libhvd-no-such-fabric.so.1"), "{reason}");
    }

    #[test]
    fn a_library_without_the_symbols_is_refused() {
        let Ok(handle) = Dynlib::open("libc.so.6") else {
            panic!("libc.so.6 should load");
        };
        let error = resolve("libc.so.6", handle).map(|_| ()).err();
        let text = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            text.contains("fi_getinfo") && text.contains("apt-get install libfabric1"),
            "{text}"
        );
    }
}
