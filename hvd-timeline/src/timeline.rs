//! [`Timeline`]: the `Collective` middleware that records a span per tensor per call.

use std::fmt;
use std::sync::{Arc, OnceLock};

use hvd_core::trace::SpanArgs;
use hvd_core::{Collective, Device, DeviceMemory, Reduction, Result, Tensor, TensorMut, Topology};

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

/// The span names of one backend, built once rather than on every call.
struct SpanNames {
    allreduce: String,
    broadcast: String,
    allgather: String,
    alltoall: String,
    reducescatter: String,
    barrier: String,
}

impl SpanNames {
    fn new(backend: &str) -> Self {
        let backend = backend.to_ascii_uppercase();
        let name = |op: &str| format!("{backend}_{op}");
        SpanNames {
            allreduce: name("ALLREDUCE"),
            broadcast: name("BROADCAST"),
            allgather: name("ALLGATHER"),
            alltoall: name("ALLTOALL"),
            reducescatter: name("REDUCESCATTER"),
            barrier: name("BARRIER"),
        }
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

    /// The wrapped collective.
    pub fn inner(&self) -> &C {
        &self.inner
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

impl<C: Collective> Collective for Timeline<C> {
    fn topology(&self) -> &Topology {
        self.inner.topology()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn supports(&self, device: Device) -> bool {
        self.inner.supports(device)
    }

    fn fuses_batches(&self) -> bool {
        self.inner.fuses_batches()
    }

    fn backend_on(&self, device: Device) -> &'static str {
        self.inner.backend_on(device)
    }

    fn device_memory(&self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        self.inner.device_memory(device)
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let device = tensors.first().map_or(Device::Cpu, TensorMut::device);
        let span = &self.spans_on(device).allreduce;
        let open = self.begin(span, || {
            tensors.iter().map(|t| (t.name(), args_of_mut(t))).collect()
        });
        let result = self.inner.allreduce(tensors, reduction);
        self.end(span, open);
        result
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        let device = tensors.first().map_or(Device::Cpu, TensorMut::device);
        let span = &self.spans_on(device).broadcast;
        let open = self.begin(span, || {
            tensors.iter().map(|t| (t.name(), args_of_mut(t))).collect()
        });
        let result = self.inner.broadcast(tensors, root);
        self.end(span, open);
        result
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let span = &self.spans_on(input.device()).allgather;
        let open = self.begin(span, || rows_of(input, output));
        let result = self.inner.allgather(input, output, counts);
        self.end(span, open);
        result
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let span = &self.spans_on(input.device()).alltoall;
        let open = self.begin(span, || rows_of(input, output));
        let result = self.inner.alltoall(input, send_counts, output, recv_counts);
        self.end(span, open);
        result
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let span = &self.spans_on(input.device()).reducescatter;
        let open = self.begin(span, || rows_of(input, output));
        let result = self.inner.reducescatter(input, output, counts, reduction);
        self.end(span, open);
        result
    }

    fn barrier(&self) -> Result<()> {
        let span = &self.spans.barrier;
        let open = self.begin(span, || vec![(BARRIER_ROW, SpanArgs::default())]);
        let result = self.inner.barrier();
        self.end(span, open);
        result
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let sub = self.inner.split(members)?;
        Ok(sub
            .map(|sub| Box::new(Timeline::new(sub, self.recorder.clone())) as Box<dyn Collective>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_are_the_upper_cased_backend_and_the_op() {
        let n = SpanNames::new("tcp");
        let names = [
            n.allreduce,
            n.broadcast,
            n.allgather,
            n.alltoall,
            n.reducescatter,
            n.barrier,
        ];
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
