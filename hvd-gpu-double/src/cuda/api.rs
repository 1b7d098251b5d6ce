//! The `cu*` entry points, with the signatures and `_v2` names of cuda.h.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Arc;

use super::context::{self, Context};
use super::event::Event;
use super::stream::Stream;
use super::{
    CuResult, INVALID_CONTEXT, INVALID_DEVICE, INVALID_HANDLE, INVALID_VALUE, NOT_READY,
    NOT_SUPPORTED, OUT_OF_MEMORY, SUCCESS, UNKNOWN, error_text,
};
use crate::config::{DRIVER_VERSION, settings};
use crate::handles::Handles;
use crate::inject;
use crate::memory::{self, arena};
use crate::trace::trace;

pub(crate) static STREAMS: Handles<Stream> = Handles::new();
static EVENTS: Handles<Event> = Handles::new();

const STREAM_NON_BLOCKING: c_uint = 0x1;
/// `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD`: both the NULL stream here.
const STREAM_LEGACY: usize = 0x1;
const STREAM_PER_THREAD: usize = 0x2;

const MEMORYTYPE_DEVICE: c_uint = 2;
const ATTRIBUTE_CONTEXT: c_int = 1;
const ATTRIBUTE_MEMORY_TYPE: c_int = 2;
const ATTRIBUTE_DEVICE_POINTER: c_int = 3;
const ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
const ATTRIBUTE_RANGE_START_ADDR: c_int = 11;
const ATTRIBUTE_RANGE_SIZE: c_int = 12;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemLocation {
    kind: c_int,
    id: c_int,
}

/// `CUmemcpyAttributes` (v1).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemcpyAttributes {
    src_access_order: c_int,
    src_loc_hint: MemLocation,
    dst_loc_hint: MemLocation,
    flags: c_uint,
}

fn result(outcome: Result<(), CuResult>) -> CuResult {
    outcome.err().unwrap_or(SUCCESS)
}

/// What every entry point checks first: an injected failure of this call.
fn enter(function: &str) -> Result<(), CuResult> {
    if inject::fails(function, None) {
        return Err(UNKNOWN);
    }
    Ok(())
}

/// Writes `value` through an output pointer, refusing a null one.
///
/// # Safety
/// `out` is null or valid for writing a `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Result<(), CuResult> {
    if out.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null, and valid for writes by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// The context of device `ordinal` given as a C `int`.
fn device(ordinal: c_int) -> Result<&'static Arc<Context>, CuResult> {
    context::initialized()?;
    usize::try_from(ordinal)
        .ok()
        .and_then(|o| context::contexts().get(o))
        .ok_or(INVALID_DEVICE)
}

/// The stream of a handle, with its context; the special handles are the current
/// context's NULL stream.
pub(crate) fn stream(handle: usize) -> Result<(&'static Arc<Context>, Arc<Stream>), CuResult> {
    let current = context::current()?;
    if matches!(handle, 0 | STREAM_LEGACY | STREAM_PER_THREAD) {
        return Ok((current, current.null_stream()));
    }
    let stream = STREAMS.get(handle).ok_or(INVALID_HANDLE)?;
    let context = &context::contexts()[stream.ordinal as usize];
    Ok((context, stream))
}

fn event(handle: usize) -> Result<Arc<Event>, CuResult> {
    context::current()?;
    EVENTS.get(handle).ok_or(INVALID_HANDLE)
}

/// Checks that `len` bytes at `ptr` are device memory (any length is fine at any
/// address when it is 0).
fn device_range(ptr: u64, len: usize) -> Result<(), CuResult> {
    if len == 0 {
        return Ok(());
    }
    arena()
        .and_then(|a| a.shadow(ptr, len))
        .map(|_| ())
        .ok_or(INVALID_VALUE)
}

/// Copies between device addresses when the stream runs the copy.
fn copy_on_device(dst: u64, src: u64, len: usize) {
    let Some(arena) = arena() else { return };
    match (arena.shadow(dst, len), arena.shadow(src, len)) {
        // SAFETY: both ranges are allocated device memory of `len` bytes; they may
        // overlap, which `copy` allows.
        (Some(to), Some(from)) => unsafe { std::ptr::copy(from, to, len) },
        _ if len == 0 => {}
        _ => eprintln!("hvd-gpu-double: illegal address in a device copy (freed while queued?)"),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn cuInit(flags: c_uint) -> CuResult {
    trace!("cuInit", "flags={flags}");
    if settings().problem.is_some() || flags != 0 {
        return INVALID_VALUE;
    }
    result(enter("cuInit").map(|()| context::init()))
}

/// # Safety
/// `version` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CuResult {
    // SAFETY: the caller's contract.
    result(unsafe { put(version, DRIVER_VERSION) })
}

/// # Safety
/// `count` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CuResult {
    result(context::initialized().and_then(|()| {
        // SAFETY: the caller's contract.
        unsafe { put(count, settings().devices as c_int) }
    }))
}

/// # Safety
/// `dev` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(dev: *mut c_int, ordinal: c_int) -> CuResult {
    trace!("cuDeviceGet", "ordinal={ordinal}");
    result(device(ordinal).and_then(|c| {
        // SAFETY: the caller's contract.
        unsafe { put(dev, c.ordinal as c_int) }
    }))
}

/// # Safety
/// `name` is null or valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> CuResult {
    result(device(dev).and_then(|_| {
        let text = b"hvd GPU test double\0";
        let len = usize::try_from(len).map_err(|_| INVALID_VALUE)?;
        if name.is_null() || len == 0 {
            return Err(INVALID_VALUE);
        }
        let n = text.len().min(len);
        // SAFETY: `name` holds `len >= n` bytes; the last one written is a NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast(), name, n);
            name.add(n - 1).write(0);
        }
        Ok(())
    }))
}

/// # Safety
/// `bytes` is null or valid for writing a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: c_int) -> CuResult {
    result(device(dev).and_then(|c| {
        let total = arena().map_or(0, |a| a.info(c.ordinal).1);
        // SAFETY: the caller's contract.
        unsafe { put(bytes, total) }
    }))
}

/// # Safety
/// `ctx` is null or valid for writing a `CUcontext`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut usize, dev: c_int) -> CuResult {
    trace!("cuDevicePrimaryCtxRetain", "device={dev}");
    result(
        enter("cuDevicePrimaryCtxRetain")
            .and_then(|()| device(dev))
            .and_then(|c| {
                // SAFETY: the caller's contract.
                unsafe { put(ctx, context::handle(c.ordinal)) }
            }),
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: c_int) -> CuResult {
    result(device(dev).map(drop))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetCurrent(ctx: usize) -> CuResult {
    result(context::initialized().and_then(|()| {
        if ctx == 0 {
            context::set_current(None);
            return Ok(());
        }
        let context = context::from_handle(ctx).ok_or(INVALID_CONTEXT)?;
        context::set_current(Some(context));
        Ok(())
    }))
}

/// # Safety
/// `ctx` is null or valid for writing a `CUcontext`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut usize) -> CuResult {
    result(context::initialized().and_then(|()| {
        let handle = context::current_ordinal().map_or(0, context::handle);
        // SAFETY: the caller's contract.
        unsafe { put(ctx, handle) }
    }))
}

/// # Safety
/// `dev` is null or valid for writing an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice(dev: *mut c_int) -> CuResult {
    result(context::current().and_then(|c| {
        // SAFETY: the caller's contract.
        unsafe { put(dev, c.ordinal as c_int) }
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSynchronize() -> CuResult {
    trace!("cuCtxSynchronize");
    result(context::current().map(|c| c.synchronize()))
}

/// # Safety
/// `dptr` is null or valid for writing a `CUdeviceptr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut u64, bytes: usize) -> CuResult {
    trace!("cuMemAlloc_v2", "bytes={bytes}");
    result(enter("cuMemAlloc_v2").and_then(|()| {
        let context = context::current()?;
        if bytes == 0 {
            return Err(INVALID_VALUE);
        }
        if inject::out_of_memory() {
            return Err(OUT_OF_MEMORY);
        }
        let arena = arena().ok_or(OUT_OF_MEMORY)?;
        let ptr = arena.alloc(bytes, context.ordinal).ok_or(OUT_OF_MEMORY)?;
        // SAFETY: the caller's contract.
        unsafe { put(dptr, ptr) }
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuMemFree_v2(dptr: u64) -> CuResult {
    trace!("cuMemFree_v2");
    result(enter("cuMemFree_v2").and_then(|()| {
        let context = context::current()?;
        let arena = arena().ok_or(INVALID_VALUE)?;
        let found = arena
            .find(dptr)
            .filter(|f| f.start == dptr)
            .ok_or(INVALID_VALUE)?;
        // Like cudaFree: the device's queued work, which may use the memory, runs first.
        context::contexts()[found.ordinal as usize].synchronize();
        if context.ordinal != found.ordinal {
            context.synchronize();
        }
        arena.free(dptr).then_some(()).ok_or(INVALID_VALUE)
    }))
}

/// # Safety
/// `free` and `total` are null or valid for writing a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CuResult {
    result(context::current().and_then(|c| {
        let (f, t) = arena().map_or((0, 0), |a| a.info(c.ordinal));
        // SAFETY: the caller's contract.
        unsafe { put(free, f).and_then(|()| put(total, t)) }
    }))
}

/// # Safety
/// `data` is valid for writing the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attribute: c_int,
    ptr: u64,
) -> CuResult {
    trace!("cuPointerGetAttribute", "attribute={attribute}");
    result(context::initialized().and_then(|()| {
        let found = arena().and_then(|a| a.find(ptr)).ok_or(INVALID_VALUE)?;
        // SAFETY: for each attribute the caller passes storage of its C type.
        unsafe {
            match attribute {
                ATTRIBUTE_MEMORY_TYPE => put(data.cast::<c_uint>(), MEMORYTYPE_DEVICE),
                ATTRIBUTE_DEVICE_ORDINAL => put(data.cast::<c_int>(), found.ordinal as c_int),
                ATTRIBUTE_CONTEXT => put(data.cast::<usize>(), context::handle(found.ordinal)),
                ATTRIBUTE_DEVICE_POINTER => put(data.cast::<u64>(), ptr),
                ATTRIBUTE_RANGE_START_ADDR => put(data.cast::<u64>(), found.start),
                ATTRIBUTE_RANGE_SIZE => put(data.cast::<usize>(), found.len),
                _ => Err(NOT_SUPPORTED),
            }
        }
    }))
}

/// Queues a host-to-device copy of `len` bytes read from `src` now (pageable memory).
///
/// # Safety
/// `src` is valid for reading `len` bytes.
unsafe fn upload(
    stream_handle: usize,
    dst: u64,
    src: *const c_void,
    len: usize,
) -> Result<u64, CuResult> {
    let (context, stream) = stream(stream_handle)?;
    device_range(dst, len)?;
    if src.is_null() && len > 0 {
        return Err(INVALID_VALUE);
    }
    let data = if len == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(src.cast::<u8>(), len) }.to_vec()
    };
    Ok(context.enqueue(&stream, Vec::new(), move || {
        // SAFETY: the stream owns the destination while the copy runs.
        if let Some(to) = unsafe { memory::bytes(dst, len) } {
            to.copy_from_slice(&data);
        }
    }))
}

/// Queues a device-to-host copy that writes `dst` when the stream runs it (pinned
/// memory): the caller must keep `dst` alive and wait before reading it.
///
/// # Safety
/// `dst` stays valid for writing `len` bytes until the copy has run.
unsafe fn download(
    stream_handle: usize,
    dst: *mut c_void,
    src: u64,
    len: usize,
) -> Result<(Arc<Stream>, u64), CuResult> {
    let (context, stream) = stream(stream_handle)?;
    device_range(src, len)?;
    if dst.is_null() && len > 0 {
        return Err(INVALID_VALUE);
    }
    let dst = dst as usize;
    let seq = context.enqueue(&stream, Vec::new(), move || {
        // SAFETY: the source is allocated device memory; the destination is the
        // caller's, valid until the copy has run.
        if let Some(from) = unsafe { memory::bytes(src, len) } {
            // SAFETY: see above.
            unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), dst as *mut u8, len) };
        }
    });
    Ok((stream, seq))
}

/// # Safety
/// `src` is valid for reading `bytes` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, bytes: usize) -> CuResult {
    trace!("cuMemcpyHtoD_v2", "bytes={bytes}");
    result(enter("cuMemcpyHtoD_v2").and_then(|()| {
        // SAFETY: the caller's contract.
        let seq = unsafe { upload(0, dst, src, bytes) }?;
        stream(0)?.1.wait_for(seq);
        Ok(())
    }))
}

/// # Safety
/// `dst` is valid for writing `bytes` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, bytes: usize) -> CuResult {
    trace!("cuMemcpyDtoH_v2", "bytes={bytes}");
    result(enter("cuMemcpyDtoH_v2").and_then(|()| {
        // SAFETY: the caller's contract; the copy has run when this returns.
        let (stream, seq) = unsafe { download(0, dst, src, bytes) }?;
        stream.wait_for(seq);
        Ok(())
    }))
}

/// # Safety
/// `src` is valid for reading `bytes` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: u64,
    src: *const c_void,
    bytes: usize,
    stream: usize,
) -> CuResult {
    trace!("cuMemcpyHtoDAsync_v2", "bytes={bytes}");
    result(enter("cuMemcpyHtoDAsync_v2").and_then(|()| {
        // SAFETY: the caller's contract.
        unsafe { upload(stream, dst, src, bytes) }.map(drop)
    }))
}

/// # Safety
/// `dst` stays valid for writing `bytes` bytes until the stream has run the copy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: u64,
    bytes: usize,
    stream: usize,
) -> CuResult {
    trace!("cuMemcpyDtoHAsync_v2", "bytes={bytes}");
    result(enter("cuMemcpyDtoHAsync_v2").and_then(|()| {
        // SAFETY: the caller's contract.
        unsafe { download(stream, dst, src, bytes) }.map(drop)
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: u64,
    src: u64,
    bytes: usize,
    stream_handle: usize,
) -> CuResult {
    trace!("cuMemcpyDtoDAsync_v2", "bytes={bytes}");
    result(enter("cuMemcpyDtoDAsync_v2").and_then(|()| {
        let (context, stream) = stream(stream_handle)?;
        device_range(dst, bytes)?;
        device_range(src, bytes)?;
        context.enqueue(&stream, Vec::new(), move || copy_on_device(dst, src, bytes));
        Ok(())
    }))
}

/// Checks a batch's attributes as CUDA documents them: at least one, the first applying
/// from copy 0, indices increasing, a valid source access order.
fn check_attributes(
    attributes: &[MemcpyAttributes],
    indices: &[usize],
    count: usize,
) -> Result<(), CuResult> {
    if attributes.is_empty() || indices.first() != Some(&0) {
        return Err(INVALID_VALUE);
    }
    if indices.windows(2).any(|w| w[0] >= w[1]) || indices.iter().any(|i| *i >= count) {
        return Err(INVALID_VALUE);
    }
    if attributes
        .iter()
        .any(|a| !(1..=3).contains(&a.src_access_order))
    {
        return Err(INVALID_VALUE);
    }
    Ok(())
}

/// # Safety
/// `dsts`, `srcs` and `sizes` hold `count` entries; `attrs` and `attrs_idxs` hold
/// `num_attrs`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyBatchAsync_v2(
    dsts: *mut u64,
    srcs: *mut u64,
    sizes: *mut usize,
    count: usize,
    attrs: *mut MemcpyAttributes,
    attrs_idxs: *mut usize,
    num_attrs: usize,
    stream_handle: usize,
) -> CuResult {
    result(enter("cuMemcpyBatchAsync_v2").and_then(|()| {
        let (context, stream) = stream(stream_handle)?;
        // The batch API refuses the legacy NULL stream.
        if stream.is_null
            || count == 0
            || [dsts, srcs].iter().any(|p| p.is_null())
            || sizes.is_null()
        {
            return Err(INVALID_VALUE);
        }
        if attrs.is_null() || attrs_idxs.is_null() || num_attrs == 0 || num_attrs > count {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: each array holds its count of entries.
        let (dsts, srcs, sizes, attributes, indices) = unsafe {
            (
                std::slice::from_raw_parts(dsts, count).to_vec(),
                std::slice::from_raw_parts(srcs, count).to_vec(),
                std::slice::from_raw_parts(sizes, count).to_vec(),
                std::slice::from_raw_parts(attrs, num_attrs),
                std::slice::from_raw_parts(attrs_idxs, num_attrs),
            )
        };
        check_attributes(attributes, indices, count)?;
        for i in 0..count {
            // Device-to-device batches only: that is all hvd asks of it.
            device_range(dsts[i], sizes[i])?;
            device_range(srcs[i], sizes[i])?;
        }
        trace!(
            "cuMemcpyBatchAsync_v2",
            "count={count} bytes={}",
            sizes.iter().sum::<usize>()
        );
        context.enqueue(&stream, Vec::new(), move || {
            for i in 0..count {
                copy_on_device(dsts[i], srcs[i], sizes[i]);
            }
        });
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuMemsetD8Async(
    dst: u64,
    value: u8,
    bytes: usize,
    stream_handle: usize,
) -> CuResult {
    trace!("cuMemsetD8Async", "bytes={bytes}");
    result(enter("cuMemsetD8Async").and_then(|()| {
        let (context, stream) = stream(stream_handle)?;
        device_range(dst, bytes)?;
        context.enqueue(&stream, Vec::new(), move || {
            // SAFETY: the stream owns the destination while the task runs.
            if let Some(to) = unsafe { memory::bytes(dst, bytes) } {
                to.fill(value);
            }
        });
        Ok(())
    }))
}

/// # Safety
/// `handle` is null or valid for writing a `CUstream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreate(handle: *mut usize, flags: c_uint) -> CuResult {
    trace!("cuStreamCreate", "flags={flags}");
    result(enter("cuStreamCreate").and_then(|()| {
        let context = context::current()?;
        if flags & !STREAM_NON_BLOCKING != 0 {
            return Err(INVALID_VALUE);
        }
        let stream = Stream::start(context.ordinal, flags & STREAM_NON_BLOCKING == 0, false);
        context.register(&stream);
        // SAFETY: the caller's contract.
        unsafe { put(handle, STREAMS.insert(stream)) }
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuStreamDestroy_v2(handle: usize) -> CuResult {
    trace!("cuStreamDestroy_v2");
    result(context::current().and_then(|_| {
        let stream = STREAMS.remove(handle).ok_or(INVALID_HANDLE)?;
        stream.close();
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuStreamSynchronize(handle: usize) -> CuResult {
    trace!("cuStreamSynchronize");
    result(enter("cuStreamSynchronize").and_then(|()| {
        let (_, stream) = stream(handle)?;
        stream.wait_for(stream.enqueued());
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuStreamQuery(handle: usize) -> CuResult {
    result(stream(handle).and_then(|(_, s)| {
        // Asking counts as waiting (lazy mode).
        let last = s.enqueued();
        s.demand(last);
        if s.completed() >= last {
            Ok(())
        } else {
            Err(NOT_READY)
        }
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuStreamWaitEvent(handle: usize, event_handle: usize, flags: c_uint) -> CuResult {
    trace!("cuStreamWaitEvent");
    result(enter("cuStreamWaitEvent").and_then(|()| {
        let (context, stream) = stream(handle)?;
        let event = event(event_handle)?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        // The most recent record at the time of the call is what the stream waits for.
        let after = event.mark().into_iter().collect();
        context.enqueue(&stream, after, || {});
        Ok(())
    }))
}

/// # Safety
/// `handle` is null or valid for writing a `CUevent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventCreate(handle: *mut usize, flags: c_uint) -> CuResult {
    trace!("cuEventCreate", "flags={flags}");
    result(enter("cuEventCreate").and_then(|()| {
        context::current()?;
        // SAFETY: the caller's contract.
        unsafe { put(handle, EVENTS.insert(Arc::new(Event::default()))) }
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuEventRecord(event_handle: usize, stream_handle: usize) -> CuResult {
    trace!("cuEventRecord");
    result(enter("cuEventRecord").and_then(|()| {
        let event = event(event_handle)?;
        let (context, stream) = stream(stream_handle)?;
        // A marker task: it inherits the NULL stream's ordering like any other work.
        let seq = context.enqueue(&stream, Vec::new(), || {});
        event.record(stream, seq);
        Ok(())
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuEventQuery(event_handle: usize) -> CuResult {
    result(enter("cuEventQuery").and_then(|()| {
        if event(event_handle)?.complete() {
            Ok(())
        } else {
            Err(NOT_READY)
        }
    }))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuEventSynchronize(event_handle: usize) -> CuResult {
    trace!("cuEventSynchronize");
    result(event(event_handle).map(|e| e.wait()))
}

#[unsafe(no_mangle)]
pub extern "C" fn cuEventDestroy_v2(event_handle: usize) -> CuResult {
    result(
        context::current()
            .and_then(|_| EVENTS.remove(event_handle).map(drop).ok_or(INVALID_HANDLE)),
    )
}

/// # Safety
/// `text` is null or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(code: CuResult, text: *mut *const c_char) -> CuResult {
    match error_text(code) {
        // SAFETY: the caller's contract; the text is static.
        Some((_, string)) => result(unsafe { put(text, string.as_ptr().cast()) }),
        None => INVALID_VALUE,
    }
}

/// # Safety
/// `text` is null or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(code: CuResult, text: *mut *const c_char) -> CuResult {
    match error_text(code) {
        // SAFETY: the caller's contract; the text is static.
        Some((name, _)) => result(unsafe { put(text, name.as_ptr().cast()) }),
        None => INVALID_VALUE,
    }
}
