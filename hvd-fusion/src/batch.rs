//! Moving a batch's tensors in and out of the fusion buffer, and handing the inner
//! collective views of them.

use hvd_core::trace::{SpanArgs, Tracer};
use hvd_core::{DType, Error, MemoryMut, Result, TensorMut};

use crate::pack::{Item, Pack};

/// The plan's view of a batch: host tensors by dtype and size, the rest as device memory.
pub(crate) fn items(tensors: &[TensorMut<'_>], packed_dtype: impl Fn(DType) -> DType) -> Vec<Item> {
    tensors
        .iter()
        .map(|t| match t.host() {
            Some(bytes) => Item::Packable(packed_dtype(t.dtype()), bytes.len()),
            None => Item::Alone,
        })
        .collect()
}

/// The name a pack carries to the inner collective (for its errors and traces).
pub(crate) fn pack_name(tensors: &[TensorMut<'_>], pack: &Pack) -> String {
    match pack.members.as_slice() {
        [one] => tensors[*one].name().to_owned(),
        [first, rest @ ..] => format!("{} and {} more, fused", tensors[*first].name(), rest.len()),
        [] => "empty fusion pack".to_owned(),
    }
}

/// The plan only packs host tensors; this error would mean it packed another.
fn not_host(t: &TensorMut<'_>) -> Error {
    Error::Unsupported {
        backend: "fusion",
        what: format!(
            "packing {} memory into the host fusion buffer (tensor '{}')",
            t.device(),
            t.name()
        ),
    }
}

/// The span of a tensor's copy into the fusion buffer (prescale included), as Horovod
/// names it in its timeline.
pub const MEMCPY_IN_FUSION_BUFFER: &str = "MEMCPY_IN_FUSION_BUFFER";
/// The span of a tensor's copy out of the fusion buffer.
pub const MEMCPY_OUT_FUSION_BUFFER: &str = "MEMCPY_OUT_FUSION_BUFFER";

/// Runs `copy` inside span `activity` on the row of tensor `name`, when there is a tracer.
fn traced<T>(
    tracer: Option<&dyn Tracer>,
    activity: &str,
    name: &str,
    args: SpanArgs,
    copy: impl FnOnce() -> T,
) -> T {
    let Some(tracer) = tracer else {
        return copy();
    };
    tracer.begin(name, activity, args);
    let out = copy();
    tracer.end(name, activity);
    out
}

/// The span args of `t`, built only when there is a tracer to take them.
pub(crate) fn args_for(tracer: Option<&dyn Tracer>, t: &TensorMut<'_>) -> SpanArgs {
    match tracer {
        Some(_) => SpanArgs::of(t.dtype(), t.shape(), t.byte_len()),
        None => SpanArgs::default(),
    }
}

/// Copies the pack's members back to back into `region`, calling `prepare` on each
/// member's bytes right after its copy.
pub(crate) fn copy_in(
    tensors: &[TensorMut<'_>],
    pack: &Pack,
    region: &mut [u8],
    tracer: Option<&dyn Tracer>,
    prepare: impl Fn(&mut [u8]),
) -> Result<()> {
    let mut at = 0;
    for t in pack.members.iter().map(|i| &tensors[*i]) {
        let src = t.host().ok_or_else(|| not_host(t))?;
        let dst = &mut region[at..at + src.len()];
        let args = args_for(tracer, t);
        traced(tracer, MEMCPY_IN_FUSION_BUFFER, t.name(), args, || {
            dst.copy_from_slice(src);
            prepare(dst);
        });
        at += src.len();
    }
    Ok(())
}

/// Copies the pack's members back out of `region`.
pub(crate) fn copy_out(
    tensors: &mut [TensorMut<'_>],
    pack: &Pack,
    region: &[u8],
    tracer: Option<&dyn Tracer>,
) -> Result<()> {
    let mut at = 0;
    for i in &pack.members {
        let t = &mut tensors[*i];
        let (name, args) = (t.name(), args_for(tracer, t));
        let Some(dst) = t.host_mut() else {
            return Err(not_host(t));
        };
        let src = &region[at..at + dst.len()];
        traced(tracer, MEMCPY_OUT_FUSION_BUFFER, name, args, || {
            dst.copy_from_slice(src)
        });
        at += src.len();
    }
    Ok(())
}

/// One 1-D view per pack over its region of the fusion buffer.
pub(crate) fn pack_views<'b>(
    packs: &[Pack],
    names: &'b [String],
    regions: &'b mut [&mut [u8]],
) -> Result<Vec<TensorMut<'b>>> {
    packs
        .iter()
        .zip(names)
        .zip(regions.iter_mut())
        .map(|((pack, name), region)| {
            let len = pack.bytes / pack.dtype.size();
            TensorMut::from_bytes(name, pack.dtype, vec![len], region)
        })
        .collect()
}

/// Calls `f` on the tensors at `indices` (ascending), as they are: same memory, name,
/// dtype and shape, no copy.
pub(crate) fn with_subset(
    tensors: &mut [TensorMut<'_>],
    indices: &[usize],
    f: impl FnOnce(&mut [TensorMut<'_>]) -> Result<()>,
) -> Result<()> {
    if indices.len() == tensors.len() {
        return f(tensors);
    }
    let mut subset = Vec::with_capacity(indices.len());
    for (i, t) in tensors.iter_mut().enumerate() {
        if indices.binary_search(&i).is_ok() {
            subset.push(reborrow(t)?);
        }
    }
    f(&mut subset)
}

/// A second view of the same tensor, borrowing the first.
fn reborrow<'b>(t: &'b mut TensorMut<'_>) -> Result<TensorMut<'b>> {
    let (name, dtype, shape) = (t.name(), t.dtype(), t.shape().to_vec());
    match t.memory() {
        MemoryMut::Host(bytes) => TensorMut::from_bytes(name, dtype, shape, bytes),
        MemoryMut::Device(buffer) => TensorMut::from_device(name, dtype, shape, *buffer),
        MemoryMut::DeviceInto { input, output } => {
            TensorMut::from_device_into(name, dtype, shape, *input, *output)
        }
    }
}
