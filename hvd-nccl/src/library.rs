//! libnccl, loaded with `dlopen` on first use.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use hvd_core::dynlib::{self, Dynlib};
use hvd_core::{Error, Result};

/// Overrides the library to load (a path or a name).
pub const LIBRARY_VAR: &str = "HVD_NCCL_LIBRARY";

/// Names tried in order when [`LIBRARY_VAR`] is unset.
const NAMES: &[&str] = &["libnccl.so.2", "libnccl.so"];

const INSTALL_HINT: &str = "install NCCL (`apt-get install libnccl2`, or `pip install \
     nvidia-nccl-cu12` and set HVD_NCCL_LIBRARY to the wheel's lib/libnccl.so.2)";

type GetVersion = unsafe extern "C" fn(version: *mut c_int) -> c_int;
type GetErrorString = unsafe extern "C" fn(result: c_int) -> *const c_char;

/// The entry points of the loaded library; it is never unloaded.
#[derive(Debug)]
struct Library {
    name: String,
    get_version: GetVersion,
    get_error_string: GetErrorString,
}

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

fn library() -> Result<&'static Library> {
    static LIBRARY: OnceLock<Result<Library>> = OnceLock::new();
    LIBRARY.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Library> {
    let candidates = dynlib::candidates(LIBRARY_VAR, NAMES);
    let (library, name) =
        Dynlib::open_first(&candidates).map_err(|failures| Error::LibraryMissing {
            library: format!("NCCL ({})", candidates.join(", ")),
            hint: format!("{INSTALL_HINT} ({})", failures.join("; ")),
        })?;
    let find = |symbol: &CStr| -> Result<*mut c_void> {
        library
            .symbol(symbol)
            .map(|a| a.as_ptr())
            .ok_or_else(|| Error::LibraryMissing {
                library: format!("NCCL ({name})"),
                hint: format!(
                    "the library lacks {}: it is not NCCL, or too old; {INSTALL_HINT}",
                    symbol.to_string_lossy()
                ),
            })
    };
    // SAFETY: each symbol is NCCL's exported function of that name, whose C signature
    // (nccl.h) the target type repeats; the library stays loaded forever.
    unsafe {
        Ok(Library {
            name: name.to_owned(),
            get_version: std::mem::transmute::<*mut c_void, GetVersion>(find(c"ncclGetVersion")?),
            get_error_string: std::mem::transmute::<*mut c_void, GetErrorString>(find(
                c"ncclGetErrorString",
            )?),
        })
    }
}

impl Library {
    /// NCCL's own text for a result code.
    fn error_text(&self, code: c_int) -> String {
        // SAFETY: ncclGetErrorString accepts any code and returns a static C string.
        let text = unsafe { (self.get_error_string)(code) };
        if text.is_null() {
            return format!("NCCL error {code}");
        }
        // SAFETY: non-null static C string, see above.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{text} (NCCL error {code})")
    }
}

/// The version of the NCCL this process loads, or why it cannot load one.
pub fn version() -> Result<Version> {
    let library = library()?;
    let mut code: c_int = 0;
    // SAFETY: ncclGetVersion writes one int through the pointer it is given.
    let result = unsafe { (library.get_version)(&mut code) };
    if result != 0 {
        return Err(Error::LibraryMissing {
            library: format!("NCCL ({})", library.name),
            hint: format!("ncclGetVersion failed: {}", library.error_text(result)),
        });
    }
    Ok(Version::from_code(u32::try_from(code).unwrap_or(0)))
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
    }
}
