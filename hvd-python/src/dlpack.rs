//! DLPack, the C ABI frameworks exchange tensors through (`tf.experimental.dlpack`,
//! `torch.from_dlpack`, numpy's `__dlpack__`): a capsule named `dltensor` that holds a
//! `DLManagedTensor`. hvd copies a capsule's tensor into its own memory at once, so it
//! never keeps a pointer into a framework's buffer nor writes one, and hands results
//! back as capsules of its own 64-byte-aligned memory, which TensorFlow adopts without a
//! copy (and would abort the process on, were it less aligned).

use std::ffi::{CStr, c_void};

use hvd::core::DeviceBlock;
use hvd::{DType, Device};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::{PyErr, ffi};

use crate::aligned::AlignedBytes;

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

const CAPSULE: &CStr = c"dltensor";
/// The name a consumer gives a capsule it has taken over (DLPack's protocol).
const USED_CAPSULE: &CStr = c"used_dltensor";
const CPU: i32 = 1;
const CUDA: i32 = 2;
const DEVICE_NAMES: [&str; 18] = [
    "",
    "CPU",
    "CUDA",
    "CUDA host",
    "OpenCL",
    "",
    "",
    "Vulkan",
    "Metal",
    "VPI",
    "ROCm",
    "ROCm host",
    "ExtDev",
    "CUDA managed",
    "oneAPI",
    "WebGPU",
    "Hexagon",
    "MAIA",
];

/// Each hvd dtype's DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool); the
/// width is the dtype's, one lane.
const CODES: [(DType, u8); 11] = [
    (DType::I8, 0),
    (DType::I16, 0),
    (DType::I32, 0),
    (DType::I64, 0),
    (DType::U8, 1),
    (DType::U16, 1),
    (DType::F16, 2),
    (DType::F32, 2),
    (DType::F64, 2),
    (DType::BF16, 4),
    (DType::Bool, 6),
];

fn dtype_of(t: DLDataType) -> Option<DType> {
    CODES
        .iter()
        .find(|(dtype, code)| *code == t.code && dtype.size() * 8 == usize::from(t.bits))
        .filter(|_| t.lanes == 1)
        .map(|(dtype, _)| *dtype)
}

fn code_of(dtype: DType) -> PyResult<DLDataType> {
    let (_, code) = CODES.iter().find(|(d, _)| *d == dtype).ok_or_else(|| {
        PyValueError::new_err(format!("DLPack has no type code for hvd's {dtype}"))
    })?;
    Ok(DLDataType {
        code: *code,
        // Every hvd dtype is at most 8 bytes.
        bits: (dtype.size() * 8) as u8,
        lanes: 1,
    })
}

/// A capsule's tensor taken over from its producer: the producer's deleter runs when
/// this drops, whatever happened in between.
struct Consumed(*mut DLManagedTensor);

impl Drop for Consumed {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a valid `dltensor` capsule that we renamed, so
        // the tensor is ours to release, once.
        unsafe {
            if let Some(deleter) = (*self.0).deleter {
                deleter(self.0);
            }
        }
    }
}

/// A copy of a DLPack capsule's tensor in hvd's memory: its dtype, shape and bytes. The
/// capsule is consumed (renamed `used_dltensor`, its tensor released before returning).
pub(crate) fn copy_from_capsule(
    capsule: &Bound<'_, PyAny>,
    op: &str,
) -> PyResult<(DType, Vec<usize>, AlignedBytes)> {
    let raw = capsule.as_ptr();
    // SAFETY: `raw` is a live object (borrowed from `capsule`); the capsule calls check
    // its type and name, and set no Python error when it is not a capsule.
    let managed = unsafe {
        if ffi::PyCapsule_IsValid(raw, CAPSULE.as_ptr()) != 1 {
            return Err(PyValueError::new_err(format!(
                "{op}: expected a DLPack capsule named 'dltensor' that no one has consumed \
                 yet, got a {}",
                capsule.get_type().name()?
            )));
        }
        let managed = ffi::PyCapsule_GetPointer(raw, CAPSULE.as_ptr()).cast::<DLManagedTensor>();
        if managed.is_null() || ffi::PyCapsule_SetName(raw, USED_CAPSULE.as_ptr()) != 0 {
            return Err(PyErr::fetch(capsule.py()));
        }
        managed
    };
    let consumed = Consumed(managed);
    // SAFETY: a producer's DLManagedTensor stays valid until its deleter runs, which
    // `consumed` does after the copy below.
    let tensor = unsafe { &(*consumed.0).dl_tensor };
    if tensor.device.device_type != CPU {
        let device = usize::try_from(tensor.device.device_type)
            .ok()
            .and_then(|i| DEVICE_NAMES.get(i).copied())
            .filter(|name| !name.is_empty())
            .unwrap_or("unknown");
        return Err(PyValueError::new_err(format!(
            "{op}: the tensor is on a {device} device (DLPack device type {}); hvd takes \
             host tensors here, copy it to the CPU first",
            tensor.device.device_type
        )));
    }
    let dtype = dtype_of(tensor.dtype).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{op}: hvd cannot move tensors of DLPack dtype code {} with {} bits and {} \
             lanes; it supports uint8, int8, uint16, int16, int32, int64, float16, \
             bfloat16, float32, float64 and bool",
            tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
        ))
    })?;
    let ndim = usize::try_from(tensor.ndim)
        .map_err(|_| PyValueError::new_err(format!("{op}: negative DLPack ndim")))?;
    // SAFETY: DLPack gives `ndim` dims at `shape`, and `ndim` strides at `strides` when
    // that is not null.
    let (dims, strides) = unsafe {
        let dims = if ndim == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(tensor.shape, ndim)
        };
        let strides =
            (!tensor.strides.is_null()).then(|| std::slice::from_raw_parts(tensor.strides, ndim));
        (dims, strides)
    };
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|_| PyValueError::new_err(format!("{op}: negative DLPack shape {dims:?}")))?;
    if let Some(strides) = strides
        && !row_major(&shape, strides)
    {
        return Err(PyValueError::new_err(format!(
            "{op}: the tensor is not contiguous (shape {shape:?}, strides {strides:?}); \
             pass a contiguous one"
        )));
    }
    let len = shape
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| PyValueError::new_err(format!("{op}: shape {shape:?} overflows")))?;
    let bytes = if len == 0 {
        AlignedBytes::zeroed(0)
    } else if tensor.data.is_null() {
        return Err(PyValueError::new_err(format!(
            "{op}: the DLPack tensor of shape {shape:?} has no data"
        )));
    } else {
        let offset = usize::try_from(tensor.byte_offset)
            .map_err(|_| PyValueError::new_err(format!("{op}: DLPack byte_offset overflows")))?;
        // SAFETY: a CPU DLPack tensor's `len` bytes start `byte_offset` past `data`, and
        // stay valid until `consumed` releases them.
        let source =
            unsafe { std::slice::from_raw_parts(tensor.data.cast::<u8>().add(offset), len) };
        AlignedBytes::copy_of(source)
    };
    drop(consumed);
    Ok((dtype, shape, bytes))
}

/// Whether `strides` (in elements) lay `shape` out densely in row-major order; dims of
/// one element may have any stride.
fn row_major(shape: &[usize], strides: &[i64]) -> bool {
    let mut expected = 1i64;
    for (&dim, &stride) in shape.iter().zip(strides).rev() {
        if dim == 0 {
            return true;
        }
        if dim != 1 && stride != expected {
            return false;
        }
        expected = expected.saturating_mul(dim as i64);
    }
    true
}

/// The memory an exported capsule owns: host bytes, or a block of a device's memory
/// (freed, once the device's queued work is done, when the consumer lets it go).
enum Owned {
    Host(#[allow(dead_code, reason = "held for its memory, read through the tensor")] AlignedBytes),
    /// Memory lent by its owner (a loader's batch), given back when the consumer is done.
    Lent(
        #[allow(dead_code, reason = "held for its memory, read through the tensor")] Box<dyn Send>,
    ),
    Device(
        #[allow(dead_code, reason = "held for its memory, read through the tensor")] DeviceBlock,
    ),
}

/// What an exported capsule owns: the tensor DLPack describes, its shape and its memory.
/// `repr(C)` with the tensor first, so the tensor's address is this struct's.
#[repr(C)]
struct Exported {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    _memory: Owned,
}

unsafe extern "C" fn release_exported(managed: *mut DLManagedTensor) {
    // SAFETY: `manager_ctx` is the box `export` leaked; the consumer calls this once.
    unsafe { drop(Box::from_raw((*managed).manager_ctx.cast::<Exported>())) }
}

/// Releases an exported tensor no consumer took over (a capsule still named `dltensor`
/// when Python frees it).
unsafe extern "C" fn drop_unconsumed(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python on a capsule `export` made; a consumed capsule has been
    // renamed and is left alone (its consumer calls the deleter).
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, CAPSULE.as_ptr()) == 1 {
            let managed =
                ffi::PyCapsule_GetPointer(capsule, CAPSULE.as_ptr()).cast::<DLManagedTensor>();
            release_exported(managed);
        }
    }
}

/// A `dltensor` capsule that owns `bytes` as a host tensor of `dtype` and `shape`.
pub(crate) fn export(
    py: Python<'_>,
    dtype: DType,
    shape: &[usize],
    bytes: AlignedBytes,
) -> PyResult<Py<PyAny>> {
    let data = bytes.as_ptr().cast_mut().cast::<c_void>();
    let device = DLDevice {
        device_type: CPU,
        device_id: 0,
    };
    make_capsule(py, dtype, shape, data, device, Owned::Host(bytes))
}

/// A `dltensor` capsule of a host tensor of `dtype` and `shape` at `data`, memory that
/// `owner` keeps valid, and writable by the consumer, until the capsule and every
/// tensor made from it are gone; `owner` is dropped then.
pub(crate) fn export_lent(
    py: Python<'_>,
    dtype: DType,
    shape: &[usize],
    data: *mut c_void,
    owner: Box<dyn Send>,
) -> PyResult<Py<PyAny>> {
    let device = DLDevice {
        device_type: CPU,
        device_id: 0,
    };
    make_capsule(py, dtype, shape, data, device, Owned::Lent(owner))
}

/// A `dltensor` capsule that owns `block` as a CUDA tensor of `dtype` and `shape` on the
/// block's device; its contents must be complete (the runtime's results are, once their
/// handle is waited on), as a consumer given a bare capsule uses it at once.
pub(crate) fn export_device(
    py: Python<'_>,
    dtype: DType,
    shape: &[usize],
    block: DeviceBlock,
) -> PyResult<Py<PyAny>> {
    let buffer = block.buffer();
    let Device::Cuda(ordinal) = buffer.device() else {
        return Err(PyValueError::new_err("a device result outside CUDA memory"));
    };
    let device = DLDevice {
        device_type: CUDA,
        device_id: ordinal as i32,
    };
    let data = buffer.ptr() as *mut c_void;
    make_capsule(py, dtype, shape, data, device, Owned::Device(block))
}

fn make_capsule(
    py: Python<'_>,
    dtype: DType,
    shape: &[usize],
    data: *mut c_void,
    device: DLDevice,
    memory: Owned,
) -> PyResult<Py<PyAny>> {
    let dtype = code_of(dtype)?;
    let mut shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let ndim = shape.len() as i32;
    let shape_ptr = shape.as_mut_ptr();
    let exported = Box::into_raw(Box::new(Exported {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data,
                device,
                ndim,
                dtype,
                shape: shape_ptr,
                // Null: dense and row-major.
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(release_exported),
        },
        shape,
        _memory: memory,
    }));
    // SAFETY: `exported` is a fresh, valid box; the shape and data pointers point into
    // memory it owns (heap or device), which does not move with it. If the capsule cannot
    // be made, nothing else has seen the box and it is freed here.
    unsafe {
        (*exported).managed.manager_ctx = exported.cast();
        let capsule = ffi::PyCapsule_New(exported.cast(), CAPSULE.as_ptr(), Some(drop_unconsumed));
        if capsule.is_null() {
            release_exported(exported.cast());
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule).unbind())
    }
}
