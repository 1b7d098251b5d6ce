//! The CUDA driver (libcuda), loaded with `dlopen` on first use: the entry points hvd
//! calls, with the C signatures and `_v2` names of cuda.h.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

use hvd_core::dynlib::{Loaded, missing_symbol, open_library};
use hvd_core::{Error, Result};

/// Overrides the driver library to load (a path or a name).
pub const CUDA_LIBRARY_VAR: &str = "HVD_CUDA_LIBRARY";

/// Names tried in order when [`CUDA_LIBRARY_VAR`] is unset: the driver's soname.
pub(crate) const NAMES: &[&str] = &["libcuda.so.1"];

const INSTALL_HINT: &str = "install the NVIDIA driver (libcuda.so.1 comes with it), or set \
     HVD_CUDA_LIBRARY to its path";

pub(crate) type CuResult = c_int;
pub(crate) type Context = *mut c_void;
pub(crate) type Stream = *mut c_void;
pub(crate) type Event = *mut c_void;
pub(crate) type DevicePtr = u64;

pub(crate) const SUCCESS: CuResult = 0;
pub(crate) const NOT_READY: CuResult = 600;
pub(crate) const STREAM_NON_BLOCKING: c_uint = 0x1;
pub(crate) const EVENT_DISABLE_TIMING: c_uint = 0x2;
/// `CU_MEMCPY_SRC_ACCESS_ORDER_STREAM`.
pub(crate) const SRC_ACCESS_ORDER_STREAM: c_int = 1;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MemLocation {
    kind: c_int,
    id: c_int,
}

/// `CUmemcpyAttributes`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MemcpyAttributes {
    src_access_order: c_int,
    src_loc_hint: MemLocation,
    dst_loc_hint: MemLocation,
    flags: c_uint,
}

impl MemcpyAttributes {
    /// Copies whose sources are read in stream order, with no hints.
    pub(crate) fn in_stream_order() -> MemcpyAttributes {
        MemcpyAttributes {
            src_access_order: SRC_ACCESS_ORDER_STREAM,
            ..MemcpyAttributes::default()
        }
    }
}

type BatchCopy = unsafe extern "C" fn(
    *mut DevicePtr,
    *mut DevicePtr,
    *mut usize,
    usize,
    *mut MemcpyAttributes,
    *mut usize,
    usize,
    Stream,
) -> CuResult;

/// The driver's entry points; the library is never unloaded.
#[derive(Debug)]
pub(crate) struct Driver {
    pub name: String,
    /// `cuDriverGetVersion`: 1000 * major + 10 * minor.
    pub version: i32,
    get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    pub device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    pub device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult,
    pub primary_ctx_retain: unsafe extern "C" fn(*mut Context, c_int) -> CuResult,
    pub ctx_set_current: unsafe extern "C" fn(Context) -> CuResult,
    pub ctx_get_current: unsafe extern "C" fn(*mut Context) -> CuResult,
    pub stream_create: unsafe extern "C" fn(*mut Stream, c_uint) -> CuResult,
    pub stream_destroy: unsafe extern "C" fn(Stream) -> CuResult,
    pub stream_wait_event: unsafe extern "C" fn(Stream, Event, c_uint) -> CuResult,
    pub event_create: unsafe extern "C" fn(*mut Event, c_uint) -> CuResult,
    pub event_record: unsafe extern "C" fn(Event, Stream) -> CuResult,
    pub event_query: unsafe extern "C" fn(Event) -> CuResult,
    pub event_destroy: unsafe extern "C" fn(Event) -> CuResult,
    pub mem_alloc: unsafe extern "C" fn(*mut DevicePtr, usize) -> CuResult,
    pub mem_free: unsafe extern "C" fn(DevicePtr) -> CuResult,
    pub memcpy_htod_async:
        unsafe extern "C" fn(DevicePtr, *const c_void, usize, Stream) -> CuResult,
    pub memcpy_dtoh_async: unsafe extern "C" fn(*mut c_void, DevicePtr, usize, Stream) -> CuResult,
    pub memcpy_dtod_async: unsafe extern "C" fn(DevicePtr, DevicePtr, usize, Stream) -> CuResult,
    /// `cuMemcpyBatchAsync_v2`, from CUDA 13; older drivers copy one by one.
    pub memcpy_batch_async: Option<BatchCopy>,
}

/// The driver loaded from the first of `candidates` that loads (and initialised), once
/// per list of candidates; a failure is remembered and returned to every caller.
pub(crate) fn load(candidates: &[String]) -> Result<&'static Driver> {
    static LOADED: Loaded<Driver> = Loaded::new();
    LOADED.get(candidates, open)
}

fn open(candidates: &[String]) -> Result<Driver> {
    let (library, name) = open_library(candidates, "the CUDA driver", INSTALL_HINT)?;
    let missing =
        |symbol: &CStr| missing_symbol("the CUDA driver", name, symbol, "too old", INSTALL_HINT);
    macro_rules! bind {
        ($symbol:literal) => {
            // SAFETY: the symbol is the driver's exported function of that name, whose C
            // signature (cuda.h) the field's type repeats.
            unsafe { library.function($symbol) }.ok_or_else(|| missing($symbol))?
        };
    }
    let init: unsafe extern "C" fn(c_uint) -> CuResult = bind!(c"cuInit");
    let get_version: unsafe extern "C" fn(*mut c_int) -> CuResult = bind!(c"cuDriverGetVersion");
    // SAFETY: as in `bind!`, for CUDA 13's cuMemcpyBatchAsync_v2.
    let batch: Option<BatchCopy> = unsafe { library.function(c"cuMemcpyBatchAsync_v2") };
    let driver = Driver {
        name: name.to_owned(),
        version: 0,
        get_error_name: bind!(c"cuGetErrorName"),
        get_error_string: bind!(c"cuGetErrorString"),
        device_get_count: bind!(c"cuDeviceGetCount"),
        device_get: bind!(c"cuDeviceGet"),
        device_get_name: bind!(c"cuDeviceGetName"),
        primary_ctx_retain: bind!(c"cuDevicePrimaryCtxRetain"),
        ctx_set_current: bind!(c"cuCtxSetCurrent"),
        ctx_get_current: bind!(c"cuCtxGetCurrent"),
        stream_create: bind!(c"cuStreamCreate"),
        stream_destroy: bind!(c"cuStreamDestroy_v2"),
        stream_wait_event: bind!(c"cuStreamWaitEvent"),
        event_create: bind!(c"cuEventCreate"),
        event_record: bind!(c"cuEventRecord"),
        event_query: bind!(c"cuEventQuery"),
        event_destroy: bind!(c"cuEventDestroy_v2"),
        mem_alloc: bind!(c"cuMemAlloc_v2"),
        mem_free: bind!(c"cuMemFree_v2"),
        memcpy_htod_async: bind!(c"cuMemcpyHtoDAsync_v2"),
        memcpy_dtoh_async: bind!(c"cuMemcpyDtoHAsync_v2"),
        memcpy_dtod_async: bind!(c"cuMemcpyDtoDAsync_v2"),
        memcpy_batch_async: batch,
    };
    // SAFETY: cuInit takes flags 0; it may be called any number of times.
    driver.check("cuInit", unsafe { init(0) })?;
    let mut version = 0;
    // SAFETY: writes one int.
    driver.check("cuDriverGetVersion", unsafe { get_version(&mut version) })?;
    Ok(Driver { version, ..driver })
}

impl Driver {
    /// The driver's name and words for a result code: `out of memory
    /// (CUDA_ERROR_OUT_OF_MEMORY)`.
    pub(crate) fn describe(&self, code: CuResult) -> String {
        let text = |f: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult| {
            let mut s: *const c_char = std::ptr::null();
            // SAFETY: writes a pointer to a static C string, or fails for unknown codes.
            let ok = unsafe { f(code, &mut s) } == SUCCESS && !s.is_null();
            // SAFETY: a static C string (checked non-null).
            ok.then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
        };
        match (text(self.get_error_string), text(self.get_error_name)) {
            (Some(words), Some(name)) => format!("{words} ({name})"),
            _ => format!("CUDA error {code}"),
        }
    }

    /// An error for a failed call.
    pub(crate) fn check(&self, call: &str, code: CuResult) -> Result<()> {
        if code == SUCCESS {
            return Ok(());
        }
        Err(Error::Io {
            context: format!("CUDA {call}"),
            message: self.describe(code),
            kind: std::io::ErrorKind::Other,
        })
    }

    /// The version as `major.minor`.
    pub(crate) fn version_text(&self) -> String {
        format!("{}.{}", self.version / 1000, (self.version % 1000) / 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcpy_attributes_have_cudas_layout() {
        assert_eq!(std::mem::size_of::<MemcpyAttributes>(), 24);
        assert_eq!(std::mem::offset_of!(MemcpyAttributes, flags), 20);
    }
}
