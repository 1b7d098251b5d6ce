//! Packing device tensors: the fusion buffer lives in the memory the inner transport
//! offers for the device ([`Collective::device_memory`](hvd_core::Collective::device_memory)),
//! whose copies run on the transport's own stream, so a round is one batched copy in, the
//! inner call, and one batched copy out, with a single wait at the end.

use std::sync::Arc;

use hvd_core::trace::Tracer;
use hvd_core::{
    Device, DeviceBlock, DeviceBuffer, DeviceCopy, DeviceMemory, Error, Result, TensorMut,
};

use crate::batch::{MEMCPY_IN_FUSION_BUFFER, MEMCPY_OUT_FUSION_BUFFER, args_for};
use crate::pack::{Item, Pack, Round};

/// The device fusion buffer: allocated on first use, grown on demand, reused.
#[derive(Debug, Default)]
pub(crate) struct DeviceFusionBuffer {
    block: Option<DeviceBlock>,
}

impl DeviceFusionBuffer {
    /// At least `len` bytes of `memory`, ready after its stream.
    pub(crate) fn region(
        &mut self,
        memory: &Arc<dyn DeviceMemory>,
        len: usize,
    ) -> Result<DeviceBuffer<'_>> {
        let fits = self
            .block
            .as_ref()
            .is_some_and(|b| b.len() >= len && b.memory().device() == memory.device());
        if !fits {
            tracing::debug!(bytes = len, "growing the device fusion buffer");
            // The old block goes first, so the device never holds both.
            self.block = None;
            self.block = Some(DeviceBlock::alloc(memory, len)?);
        }
        let block = self.block.as_ref().ok_or_else(|| Error::Shutdown {
            cause: "the device fusion buffer is gone".into(),
        })?;
        Ok(block.buffer())
    }
}

/// The device every tensor of the batch is on, when they share one that is not the host.
pub(crate) fn batch_device(tensors: &[TensorMut<'_>]) -> Option<Device> {
    let first = tensors.first()?.device();
    (first != Device::Cpu && tensors.iter().all(|t| t.device() == first)).then_some(first)
}

/// The plan's view of a device batch: every tensor may be packed.
pub(crate) fn items(
    tensors: &[TensorMut<'_>],
    packed_dtype: impl Fn(hvd_core::DType) -> hvd_core::DType,
) -> Vec<Item> {
    tensors
        .iter()
        .map(|t| Item::Packable(packed_dtype(t.dtype()), t.byte_len()))
        .collect()
}

/// A device tensor's memory: the one it is read from (its input, for an out-of-place
/// tensor) and the one its result goes to.
fn memory_of<'b>(t: &TensorMut<'b>) -> Result<(DeviceBuffer<'b>, DeviceBuffer<'b>)> {
    t.device_buffers().ok_or_else(|| Error::Unsupported {
        backend: "fusion",
        what: format!(
            "packing {} memory into a device fusion buffer (tensor '{}')",
            t.device(),
            t.name()
        ),
    })
}

/// The copies between the round's members and their places in the buffer at `base`:
/// into the buffer when `inward` (from an out-of-place tensor's input), out of it
/// otherwise (to its output), so an out-of-place tensor costs no copy more.
pub(crate) fn copies<'c, 'b: 'c, 'a: 'c>(
    tensors: &mut [TensorMut<'b>],
    round: &Round,
    base: DeviceBuffer<'a>,
    inward: bool,
) -> Result<Vec<DeviceCopy<'c>>> {
    let mut copies = Vec::new();
    for pack in &round.packs {
        let mut at = pack.offset;
        for i in &pack.members {
            let (input, output) = memory_of(&tensors[*i])?;
            let place = base
                .slice(at, output.len())
                .ok_or_else(|| Error::Shutdown {
                    cause: "the device fusion buffer is smaller than its round".into(),
                })?;
            copies.push(if inward {
                DeviceCopy {
                    src: input,
                    dst: place,
                }
            } else {
                DeviceCopy {
                    src: place,
                    dst: output,
                }
            });
            at += output.len();
        }
    }
    Ok(copies)
}

/// Runs `copy` inside a span `activity` on the row of every member of the round.
pub(crate) fn traced<T>(
    tracer: Option<&dyn Tracer>,
    tensors: &[TensorMut<'_>],
    packs: &[Pack],
    inward: bool,
    copy: impl FnOnce() -> T,
) -> T {
    let Some(tracer) = tracer else {
        return copy();
    };
    let activity = if inward {
        MEMCPY_IN_FUSION_BUFFER
    } else {
        MEMCPY_OUT_FUSION_BUFFER
    };
    let members = || packs.iter().flat_map(|p| &p.members).map(|i| &tensors[*i]);
    for t in members() {
        tracer.begin(t.name(), activity, args_for(Some(tracer), t));
    }
    let out = copy();
    for t in members() {
        tracer.end(t.name(), activity);
    }
    out
}
