//! The NCCL half: communicators over shared memory, groups, and its entry points.

pub(crate) mod api;
mod comm;
mod group;
mod host;
mod ops;
mod reduce;
mod segment;

/// `ncclResult_t` values (nccl.h).
pub(crate) type NcclResult = i32;
pub(crate) const SUCCESS: NcclResult = 0;
pub(crate) const UNHANDLED_CUDA_ERROR: NcclResult = 1;
pub(crate) const SYSTEM_ERROR: NcclResult = 2;
pub(crate) const INVALID_ARGUMENT: NcclResult = 4;
pub(crate) const INVALID_USAGE: NcclResult = 5;
pub(crate) const REMOTE_ERROR: NcclResult = 6;
pub(crate) const IN_PROGRESS: NcclResult = 7;

/// `ncclGetErrorString`'s text, as NCCL words it, NUL-terminated.
pub(crate) fn error_string(code: NcclResult) -> &'static str {
    match code {
        SUCCESS => "no error\0",
        UNHANDLED_CUDA_ERROR => "unhandled cuda error (run with NCCL_DEBUG=INFO for details)\0",
        SYSTEM_ERROR => "unhandled system error (run with NCCL_DEBUG=INFO for details)\0",
        3 => "internal error - please report this issue to the NCCL developers\0",
        INVALID_ARGUMENT => "invalid argument (run with NCCL_DEBUG=WARN for details)\0",
        INVALID_USAGE => "invalid usage (run with NCCL_DEBUG=WARN for details)\0",
        REMOTE_ERROR => "remote process exited or there was a network error\0",
        IN_PROGRESS => "NCCL operation in progress\0",
        _ => "unknown result code\0",
    }
}

/// An error with the text `ncclGetLastError` gives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub code: NcclResult,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(code: NcclResult, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}
