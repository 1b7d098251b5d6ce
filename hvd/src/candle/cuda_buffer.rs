//! candle tensors on a CUDA device as runtime [`Buffer`]s (feature `candle-cuda`): a copy
//! of the tensor on its device, which the collective reduces or overwrites in place
//! through its device pointer, after the work queued on candle's stream.

use candle_core::{DType as CandleDType, Device, DeviceLocation, Storage, Tensor};
use hvd_core::{DType, Device as HvdDevice, DeviceBuffer, Error, Ready};

use crate::runtime::Buffer;

/// Where a copy's elements live on the device.
#[derive(Debug, Clone, Copy)]
struct Place {
    ordinal: u32,
    ptr: u64,
    len: usize,
    /// candle's stream (`CUstream`), on which the copy was made.
    stream: u64,
}

/// A device copy of a candle tensor that the runtime works on in place.
#[derive(Debug)]
pub(crate) struct CudaTensorBuffer {
    /// The copy, or why one could not be made (for a result the runtime asked for).
    copy: Result<(Tensor, Place), Error>,
    dtype: DType,
    shape: Vec<usize>,
    device: Device,
}

/// hvd's dtype for a candle one, if hvd has it.
fn hvd_dtype(dtype: CandleDType) -> Option<DType> {
    Some(match dtype {
        CandleDType::U8 => DType::U8,
        CandleDType::I16 => DType::I16,
        CandleDType::I32 => DType::I32,
        CandleDType::I64 => DType::I64,
        CandleDType::F16 => DType::F16,
        CandleDType::BF16 => DType::BF16,
        CandleDType::F32 => DType::F32,
        CandleDType::F64 => DType::F64,
        _ => return None,
    })
}

fn device_error(what: String) -> Error {
    Error::Unsupported {
        backend: "candle",
        what,
    }
}

/// The device address and stream of a contiguous CUDA tensor's elements.
fn place(tensor: &Tensor, dtype: DType) -> candle_core::Result<Place> {
    let DeviceLocation::Cuda { gpu_id } = tensor.device().location() else {
        return Err(candle_core::Error::msg("not a CUDA tensor"));
    };
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cuda(cuda) = &*storage else {
        return Err(candle_core::Error::msg("not a CUDA tensor"));
    };
    let stream = cuda.device.cuda_stream();
    macro_rules! address {
        ($t:ty) => {{
            let (ptr, _synced) = candle_core::cuda_backend::cudarc::driver::DevicePtr::device_ptr(
                cuda.as_cuda_slice::<$t>()?,
                &stream,
            );
            ptr
        }};
    }
    let base = match dtype {
        DType::U8 => address!(u8),
        DType::I16 => address!(i16),
        DType::I32 => address!(i32),
        DType::I64 => address!(i64),
        DType::F16 => address!(hvd_core::f16),
        DType::BF16 => address!(hvd_core::bf16),
        DType::F32 => address!(f32),
        DType::F64 => address!(f64),
        other => {
            return Err(candle_core::Error::msg(format!(
                "no CUDA storage for {other}"
            )));
        }
    };
    Ok(Place {
        ordinal: gpu_id as u32,
        ptr: base + (layout.start_offset() * dtype.size()) as u64,
        len: tensor.elem_count() * dtype.size(),
        stream: stream.cu_stream() as u64,
    })
}

impl CudaTensorBuffer {
    /// A device copy of `tensor`; `None` for a dtype hvd cannot reduce.
    pub fn from_tensor(tensor: &Tensor) -> candle_core::Result<Option<Self>> {
        let Some(dtype) = hvd_dtype(tensor.dtype()) else {
            return Ok(None);
        };
        // A fresh, contiguous copy: the collective writes it in place.
        let copy = tensor.flatten_all()?.copy()?;
        let place = place(&copy, dtype)?;
        Ok(Some(CudaTensorBuffer {
            copy: Ok((copy, place)),
            dtype,
            shape: tensor.dims().to_vec(),
            device: tensor.device().clone(),
        }))
    }

    /// The tensor the collective's result makes, shaped as it was.
    pub fn into_tensor(self) -> candle_core::Result<Tensor> {
        let (copy, _) = self
            .copy
            .map_err(|e| candle_core::Error::Wrapped(Box::new(e)))?;
        copy.reshape(self.shape)
    }
}

impl Buffer for CudaTensorBuffer {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }
    fn bytes(&self) -> &[u8] {
        &[]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut []
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        let candle_dtype = match self.copy.as_ref() {
            Ok((tensor, _)) => tensor.dtype(),
            Err(_) => CandleDType::F32,
        };
        let made = Tensor::zeros(shape.iter().product::<usize>(), candle_dtype, &self.device)
            .and_then(|zeros| Ok((place(&zeros, self.dtype)?, zeros)))
            .map(|(place, zeros)| (zeros, place))
            .map_err(|e| {
                device_error(format!(
                    "a result of shape {shape:?} on {:?}: {e}",
                    self.device
                ))
            });
        CudaTensorBuffer {
            copy: made,
            dtype: self.dtype,
            shape: shape.to_vec(),
            device: self.device.clone(),
        }
    }
    fn device(&self) -> HvdDevice {
        match self.device.location() {
            DeviceLocation::Cuda { gpu_id } => HvdDevice::Cuda(gpu_id as u32),
            _ => HvdDevice::Cpu,
        }
    }
    fn device_memory(&self) -> Option<DeviceBuffer<'_>> {
        let (_, place) = self.copy.as_ref().ok()?;
        // SAFETY: `len` bytes of the copy's device memory, which this buffer owns (the
        // tensor inside it) and nothing else references while the runtime holds it.
        let buffer = unsafe { DeviceBuffer::cuda(place.ordinal, place.ptr, place.len) };
        Some(buffer.after(Ready::Stream(place.stream)))
    }
}
