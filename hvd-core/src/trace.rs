//! The hook through which middleware reports what it does to a tensor, for the Timeline.
//!
//! A [`Tracer`] receives spans (`begin`/`end` of an activity on a named tensor) and
//! instants. Middleware that does work of its own inside a collective (Tensor Fusion's
//! copies into and out of its buffer) reports it here; the Timeline implements it.
//! Activity names follow Horovod's timeline (`MEMCPY_IN_FUSION_BUFFER`, `TCP_ALLREDUCE`).

use std::fmt;

/// Extra facts about a span, shown in the trace viewer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanArgs {
    pub dtype: Option<crate::DType>,
    pub shape: Option<Vec<usize>>,
    pub bytes: Option<usize>,
}

impl SpanArgs {
    /// The args of a tensor view.
    pub fn of(dtype: crate::DType, shape: &[usize], bytes: usize) -> Self {
        SpanArgs {
            dtype: Some(dtype),
            shape: Some(shape.to_vec()),
            bytes: Some(bytes),
        }
    }
}

/// Receives what happens to tensors. Implementations must be cheap when disabled.
pub trait Tracer: Send + Sync {
    /// Whether anything is recorded now (lets callers skip building arguments).
    fn enabled(&self) -> bool;
    /// `activity` starts on `tensor`.
    fn begin(&self, tensor: &str, activity: &str, args: SpanArgs);
    /// The innermost open `activity` on `tensor` ends.
    fn end(&self, tensor: &str, activity: &str);
    /// A moment on `tensor` (`activity` is its label).
    fn instant(&self, tensor: &str, activity: &str);
}

/// A tracer that records nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTracer;

impl Tracer for NoTracer {
    fn enabled(&self) -> bool {
        false
    }
    fn begin(&self, _: &str, _: &str, _: SpanArgs) {}
    fn end(&self, _: &str, _: &str) {}
    fn instant(&self, _: &str, _: &str) {}
}

impl fmt::Debug for dyn Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracer")
            .field("enabled", &self.enabled())
            .finish()
    }
}
