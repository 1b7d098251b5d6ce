//! candle tensors as runtime [`Buffer`]s: copied to host memory in their own dtype, sent
//! through a collective, and turned back into a tensor on the original device.

use candle_core::{DType as CandleDType, Device, Tensor};
use hvd_core::{DType, Element, bf16, f16};

use crate::runtime::Buffer;

/// The elements of a tensor, in the tensor's own dtype (aligned for the kernels).
#[derive(Debug, Clone)]
enum Elements {
    U8(Vec<u8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Runs `$body` with `$v` bound to the typed vector, whatever the dtype.
macro_rules! each_dtype {
    ($elements:expr, $v:ident => $body:expr) => {
        match $elements {
            Elements::U8($v) => $body,
            Elements::I16($v) => $body,
            Elements::I32($v) => $body,
            Elements::I64($v) => $body,
            Elements::F16($v) => $body,
            Elements::Bf16($v) => $body,
            Elements::F32($v) => $body,
            Elements::F64($v) => $body,
        }
    };
}

/// A host copy of a candle tensor that the runtime can reduce or broadcast in place.
#[derive(Debug, Clone)]
pub(crate) struct TensorBuffer {
    elements: Elements,
    shape: Vec<usize>,
}

impl TensorBuffer {
    /// Copies `tensor` to host memory; `None` for a dtype hvd cannot reduce (u32, the
    /// 8-, 6- and 4-bit floats).
    pub fn from_tensor(tensor: &Tensor) -> candle_core::Result<Option<Self>> {
        let flat = tensor.flatten_all()?;
        let elements = match tensor.dtype() {
            CandleDType::U8 => Elements::U8(flat.to_vec1()?),
            CandleDType::I16 => Elements::I16(flat.to_vec1()?),
            CandleDType::I32 => Elements::I32(flat.to_vec1()?),
            CandleDType::I64 => Elements::I64(flat.to_vec1()?),
            CandleDType::F16 => Elements::F16(flat.to_vec1()?),
            CandleDType::BF16 => Elements::Bf16(flat.to_vec1()?),
            CandleDType::F32 => Elements::F32(flat.to_vec1()?),
            CandleDType::F64 => Elements::F64(flat.to_vec1()?),
            _ => return Ok(None),
        };
        Ok(Some(TensorBuffer {
            elements,
            shape: tensor.dims().to_vec(),
        }))
    }

    /// The tensor these elements make, on `device`.
    pub fn into_tensor(self, device: &Device) -> candle_core::Result<Tensor> {
        let shape = self.shape;
        each_dtype!(self.elements, v => Tensor::from_vec(v, shape, device))
    }
}

fn zeros<T: Element>(n: usize) -> Vec<T> {
    vec![T::zeroed(); n]
}

impl Buffer for TensorBuffer {
    fn dtype(&self) -> DType {
        fn of<T: Element>(_: &[T]) -> DType {
            T::DTYPE
        }
        each_dtype!(&self.elements, v => of(v))
    }
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }
    fn bytes(&self) -> &[u8] {
        each_dtype!(&self.elements, v => bytemuck::cast_slice(v))
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        each_dtype!(&mut self.elements, v => bytemuck::cast_slice_mut(v))
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        let n = shape.iter().product();
        let elements = match &self.elements {
            Elements::U8(_) => Elements::U8(zeros(n)),
            Elements::I16(_) => Elements::I16(zeros(n)),
            Elements::I32(_) => Elements::I32(zeros(n)),
            Elements::I64(_) => Elements::I64(zeros(n)),
            Elements::F16(_) => Elements::F16(zeros(n)),
            Elements::Bf16(_) => Elements::Bf16(zeros(n)),
            Elements::F32(_) => Elements::F32(zeros(n)),
            Elements::F64(_) => Elements::F64(zeros(n)),
        };
        TensorBuffer {
            elements,
            shape: shape.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_dtype_survives_the_round_trip() -> candle_core::Result<()> {
        let base = Tensor::arange(0f32, 6., &Device::Cpu)?.reshape((2, 3))?;
        for dtype in [
            CandleDType::U8,
            CandleDType::I16,
            CandleDType::I32,
            CandleDType::I64,
            CandleDType::F16,
            CandleDType::BF16,
            CandleDType::F32,
            CandleDType::F64,
        ] {
            let tensor = base.to_dtype(dtype)?;
            let buffer = TensorBuffer::from_tensor(&tensor)?.expect("supported");
            assert_eq!(buffer.shape(), vec![2, 3]);
            assert_eq!(buffer.bytes().len(), 6 * dtype.size_in_bytes());
            assert_eq!(buffer.zeroed(&[4]).bytes().len(), 4 * dtype.size_in_bytes());
            let back = buffer.into_tensor(&Device::Cpu)?;
            assert_eq!(back.dtype(), dtype);
            assert_eq!(
                back.to_dtype(CandleDType::F32)?.to_vec2::<f32>()?,
                base.to_vec2::<f32>()?
            );
        }
        Ok(())
    }

    #[test]
    fn u32_is_not_reducible() -> candle_core::Result<()> {
        let tensor = Tensor::new(&[1u32, 2], &Device::Cpu)?;
        assert!(TensorBuffer::from_tensor(&tensor)?.is_none());
        Ok(())
    }
}
