//! The CUDA driver half: contexts, memory, streams and events, and its entry points.

pub(crate) mod api;
pub(crate) mod context;
pub(crate) mod event;
pub(crate) mod stream;

/// `CUresult` values (cuda.h).
pub(crate) type CuResult = i32;
pub(crate) const SUCCESS: CuResult = 0;
pub(crate) const INVALID_VALUE: CuResult = 1;
pub(crate) const OUT_OF_MEMORY: CuResult = 2;
pub(crate) const NOT_INITIALIZED: CuResult = 3;
pub(crate) const INVALID_DEVICE: CuResult = 101;
pub(crate) const INVALID_CONTEXT: CuResult = 201;
pub(crate) const INVALID_HANDLE: CuResult = 400;
pub(crate) const NOT_READY: CuResult = 600;
pub(crate) const NOT_SUPPORTED: CuResult = 801;
pub(crate) const UNKNOWN: CuResult = 999;

/// `cuGetErrorName` and `cuGetErrorString` of a code, as NUL-terminated text.
pub(crate) fn error_text(code: CuResult) -> Option<(&'static str, &'static str)> {
    Some(match code {
        SUCCESS => ("CUDA_SUCCESS\0", "no error\0"),
        INVALID_VALUE => ("CUDA_ERROR_INVALID_VALUE\0", "invalid argument\0"),
        OUT_OF_MEMORY => ("CUDA_ERROR_OUT_OF_MEMORY\0", "out of memory\0"),
        NOT_INITIALIZED => ("CUDA_ERROR_NOT_INITIALIZED\0", "initialization error\0"),
        INVALID_DEVICE => ("CUDA_ERROR_INVALID_DEVICE\0", "invalid device ordinal\0"),
        INVALID_CONTEXT => ("CUDA_ERROR_INVALID_CONTEXT\0", "invalid device context\0"),
        INVALID_HANDLE => ("CUDA_ERROR_INVALID_HANDLE\0", "invalid resource handle\0"),
        NOT_READY => ("CUDA_ERROR_NOT_READY\0", "device not ready\0"),
        NOT_SUPPORTED => ("CUDA_ERROR_NOT_SUPPORTED\0", "operation not supported\0"),
        UNKNOWN => ("CUDA_ERROR_UNKNOWN\0", "unknown error\0"),
        _ => return None,
    })
}
