//! The buffer a candle tensor travels in: a host copy, or (feature `candle-cuda`) a copy
//! on its CUDA device that the collective works on in place.

use candle_core::{Device, Tensor};
use hvd_core::{DType, Device as HvdDevice, DeviceBuffer};

#[cfg(feature = "candle-cuda")]
use super::cuda_buffer::CudaTensorBuffer;
use super::tensor_buffer::TensorBuffer;
use crate::runtime::Buffer;

/// A candle tensor as the runtime sees it.
#[derive(Debug)]
pub(crate) enum CandleBuffer {
    Host(TensorBuffer),
    #[cfg(feature = "candle-cuda")]
    Cuda(CudaTensorBuffer),
}

impl CandleBuffer {
    /// `tensor` as a buffer: on its CUDA device when it is on one and `on_device` allows
    /// (feature `candle-cuda`), else copied to the host; `None` for a dtype hvd cannot
    /// reduce.
    pub fn from_tensor(tensor: &Tensor, on_device: bool) -> candle_core::Result<Option<Self>> {
        #[cfg(feature = "candle-cuda")]
        if on_device && tensor.device().is_cuda() {
            return Ok(CudaTensorBuffer::from_tensor(tensor)?.map(CandleBuffer::Cuda));
        }
        let _ = on_device;
        Ok(TensorBuffer::from_tensor(tensor)?.map(CandleBuffer::Host))
    }

    /// The tensor the result makes, on `device`.
    pub fn into_tensor(self, device: &Device) -> candle_core::Result<Tensor> {
        match self {
            CandleBuffer::Host(host) => host.into_tensor(device),
            #[cfg(feature = "candle-cuda")]
            CandleBuffer::Cuda(cuda) => cuda.into_tensor(),
        }
    }
}

/// Forwards a `Buffer` method to the variant.
macro_rules! each {
    ($self:expr, $b:ident => $body:expr) => {
        match $self {
            CandleBuffer::Host($b) => $body,
            #[cfg(feature = "candle-cuda")]
            CandleBuffer::Cuda($b) => $body,
        }
    };
}

impl Buffer for CandleBuffer {
    fn dtype(&self) -> DType {
        each!(self, b => b.dtype())
    }
    fn shape(&self) -> Vec<usize> {
        each!(self, b => b.shape())
    }
    fn bytes(&self) -> &[u8] {
        each!(self, b => b.bytes())
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        each!(self, b => b.bytes_mut())
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        match self {
            CandleBuffer::Host(b) => CandleBuffer::Host(b.zeroed(shape)),
            #[cfg(feature = "candle-cuda")]
            CandleBuffer::Cuda(b) => CandleBuffer::Cuda(b.zeroed(shape)),
        }
    }
    fn device(&self) -> HvdDevice {
        each!(self, b => b.device())
    }
    fn device_memory(&self) -> Option<DeviceBuffer<'_>> {
        each!(self, b => b.device_memory())
    }
}
