//! [`Timeline`]: the `Collective` middleware that records a span per tensor per call.

use std::fmt;
use std::sync::{Arc, OnceLock};

use hvd_core::layer::Layer;
use hvd_core::trace::SpanArgs;
use hvd_core::{Collective, Device, OpKind, Operation, Result, Tensor, TensorMut};

use crate::Recorder;

/// The row of a barrier, which has no tensor.
pub const BARRIER_ROW: &str = "barrier";

/// A [`Collective`] that records `<BACKEND>_<OP>` spans (`TCP_ALLREDUCE`, ...) into a
/// [`Recorder`] around every call of the `inner` collective, on the row of each tensor of
/// the call, with its dtype, shape and bytes. See the [crate docs](crate).
pub struct Timeline<C: Collective> {
    inner: C,
    recorder: Arc<Recorder>,
    spans: SpanNames,
    /// The names for calls on device memory, after the backend that carries them
    /// (`NCCL_ALLREDUCE` beside `SHM_ALLREDUCE`).
    device_spans: OnceLock<SpanNames>,
}

/// The span names of one backend, by operation, built once rather than on every call.
struct SpanNames([String; OpKind::ALL.len()]);

impl SpanNames {
    fn new(backend: &str) -> Self {
        let backend = backend.to_ascii_uppercase();
        SpanNames(OpKind::ALL.map(|op| format!("{backend}_{}", op.name().to_ascii_uppercase())))
    }

    fn of(&self, op: OpKind) -> &str {
        &self.0[op as usize - 1]
    }
}

fn args_of(t: &Tensor<'_>) -> SpanArgs {
    SpanArgs::of(t.dtype(), t.shape(), t.byte_len())
}

fn args_of_mut(t: &TensorMut<'_>) -> SpanArgs {
    SpanArgs::of(t.dtype(), t.shape(), t.byte_len())
}

/// The rows of a call with an input and an output: one, unless they are named apart.
fn rows_of<'a>(input: &Tensor<'a>, output: &TensorMut<'a>) -> Vec<(&'a str, SpanArgs)> {
    let mut rows = vec![(input.name(), args_of(input))];
    if output.name() != input.name() {
        rows.push((output.name(), args_of_mut(output)));
    }
    rows
}

/// The rows a call is recorded on: one per tensor, and the barrier's own.
fn rows<'c>(op: &Operation<'c, '_>) -> Vec<(&'c str, SpanArgs)> {
    match op {
        Operation::Allreduce { tensors, .. } | Operation::Broadcast { tensors, .. } => {
            tensors.iter().map(|t| (t.name(), args_of_mut(t))).collect()
        }
        Operation::Allgather { input, output, .. }
        | Operation::Alltoall { input, output, .. }
        | Operation::Reducescatter { input, output, .. } => rows_of(input, output),
        Operation::Barrier => vec![(BARRIER_ROW, SpanArgs::default())],
    }
}

impl<C: Collective> Timeline<C> {
    /// Wraps `inner`, recording into `recorder` (which decides whether anything is
    /// recorded: while it is stopped, a call costs one atomic load more than `inner`'s).
    /// Calls made by [`flush`](crate::flush) for this recorder are not recorded.
    pub fn new(inner: C, recorder: Arc<Recorder>) -> Self {
        let spans = SpanNames::new(inner.backend());
        Timeline {
            inner,
            recorder,
            spans,
            device_spans: OnceLock::new(),
        }
    }

    /// The span names for a call on memory of `device`.
    fn spans_on(&self, device: Device) -> &SpanNames {
        if device == Device::Cpu {
            return &self.spans;
        }
        self.device_spans
            .get_or_init(|| SpanNames::new(self.inner.backend_on(device)))
    }

    /// The recorder this timeline (and its sub-groups) record into.
    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.recorder
    }

    /// Opens `span` on `rows` when recording (the rows are only built then) and returns
    /// the rows to close it on.
    fn begin<'a>(
        &self,
        span: &str,
        rows: impl FnOnce() -> Vec<(&'a str, SpanArgs)>,
    ) -> Option<Vec<&'a str>> {
        if !self.recorder.records_calls() {
            return None;
        }
        let rows = rows();
        let names = rows.iter().map(|(name, _)| *name).collect();
        self.recorder.begin_all(span, rows);
        Some(names)
    }

    /// Closes what [`Timeline::begin`] opened. Called on error too: a failed call still
    /// took that long, and the rows stay balanced.
    fn end(&self, span: &str, open: Option<Vec<&str>>) {
        if let Some(names) = open {
            self.recorder.end_all(span, names);
        }
    }
}

impl<C: Collective> fmt::Debug for Timeline<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeline")
            .field("inner", &self.inner.backend())
            .field("recorder", &self.recorder)
            .finish()
    }
}

impl<C: Collective> Layer for Timeline<C> {
    type Inner = C;

    fn inner(&self) -> &C {
        &self.inner
    }

    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        let device = op.first_tensor().map_or(Device::Cpu, |(device, _)| device);
        let span = self.spans_on(device).of(op.kind());
        let open = self.begin(span, || rows(&op));
        let result = op.run(&self.inner);
        self.end(span, open);
        result
    }

    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let sub = this.inner.split(members)?;
        Ok(sub
            .map(|sub| Box::new(Timeline::new(sub, this.recorder.clone())) as Box<dyn Collective>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_are_the_upper_cased_backend_and_the_op() {
        let n = SpanNames::new("tcp");
        let names = OpKind::ALL.map(|op| n.of(op));
        assert_eq!(
            names,
            [
                "TCP_ALLREDUCE",
                "TCP_BROADCAST",
                "TCP_ALLGATHER",
                "TCP_ALLTOALL",
                "TCP_REDUCESCATTER",
                "TCP_BARRIER"
            ]
        );
    }
}
