//! Views of named tensors that collectives read and write.
//!
//! A view borrows the caller's memory for the length of one call; collectives never keep
//! it. Host memory is a byte slice. Device memory (for GPU transports) is a raw pointer
//! wrapped in [`DeviceBuffer`], whose constructor is `unsafe` because nothing in Rust can
//! check that the pointer is valid.

use std::borrow::Cow;
use std::marker::PhantomData;

use crate::{DType, Device, Element, Error, Result};

/// When the contents of device memory may be read: device work is queued on streams
/// and runs later, so a buffer says which work writes it.
///
/// A transport orders its reads of a buffer after that work (on CUDA: it records an event
/// on the stream, or takes the event, and makes its own stream wait for it) without
/// blocking the host. Whatever the marker, a collective's results are complete when the
/// call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Ready {
    /// Nothing queued writes it (the host synchronised, or it is fresh).
    #[default]
    Now,
    /// Written by the work queued so far on this CUDA stream (a `CUstream`; 0 is the
    /// legacy default stream).
    Stream(u64),
    /// Written by the work queued before this CUDA event (a `CUevent`) was recorded;
    /// the event must live until the collective returns.
    Event(u64),
}

/// A span of device memory, valid for the lifetime `'a` of the call it is passed to,
/// with the work it waits for ([`Ready`]).
#[derive(Debug, Clone, Copy)]
pub struct DeviceBuffer<'a> {
    ordinal: u32,
    ptr: u64,
    len: usize,
    ready: Ready,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> DeviceBuffer<'a> {
    /// Wraps `len` bytes of memory of CUDA device `ordinal` starting at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be memory of that device, allocated, and not used by anything
    /// else while the collective that receives this buffer runs.
    pub unsafe fn cuda(ordinal: u32, ptr: u64, len: usize) -> Self {
        DeviceBuffer {
            ordinal,
            ptr,
            len,
            ready: Ready::Now,
            _borrow: PhantomData,
        }
    }

    /// The same memory, written by the work `ready` names (for the stream or event of the
    /// framework that produced it).
    pub fn after(mut self, ready: Ready) -> Self {
        self.ready = ready;
        self
    }

    /// The work that writes this memory.
    pub fn ready(&self) -> Ready {
        self.ready
    }

    /// `len` bytes of this memory starting `offset` bytes in, with the same readiness;
    /// `None` when they do not fit.
    pub fn slice(&self, offset: usize, len: usize) -> Option<DeviceBuffer<'a>> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then_some(DeviceBuffer {
            ptr: self.ptr + offset as u64,
            len,
            ..*self
        })
    }

    /// The device the memory belongs to.
    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// The device address of the first byte.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Read-only memory of a tensor.
#[derive(Debug, Clone, Copy)]
pub enum Memory<'a> {
    Host(&'a [u8]),
    Device(DeviceBuffer<'a>),
}

/// Writable memory of a tensor.
#[derive(Debug)]
pub enum MemoryMut<'a> {
    Host(&'a mut [u8]),
    Device(DeviceBuffer<'a>),
    /// An out-of-place operation's device memory: it reads `input` and writes `output`
    /// (same device, same length), so no one copies the input to the output first.
    DeviceInto {
        input: DeviceBuffer<'a>,
        output: DeviceBuffer<'a>,
    },
}

/// A read-only view of a named tensor.
#[derive(Debug, Clone)]
pub struct Tensor<'a> {
    name: &'a str,
    dtype: DType,
    shape: Cow<'a, [usize]>,
    memory: Memory<'a>,
}

/// A writable view of a named tensor.
#[derive(Debug)]
pub struct TensorMut<'a> {
    name: &'a str,
    dtype: DType,
    shape: Cow<'a, [usize]>,
    memory: MemoryMut<'a>,
}

fn check_len(name: &str, dtype: DType, shape: &[usize], bytes: usize) -> Result<()> {
    let elements = shape.iter().product::<usize>();
    if elements.checked_mul(dtype.size()) != Some(bytes) {
        return Err(Error::InvalidArgument {
            rank: 0,
            op: "tensor view",
            tensor: name.into(),
            reason: format!(
                "shape {shape:?} of {dtype} needs {} bytes but the buffer holds {bytes}",
                elements.saturating_mul(dtype.size())
            ),
        });
    }
    Ok(())
}

impl<'a> Tensor<'a> {
    /// A 1-D view of a typed host slice.
    pub fn from_slice<T: Element>(name: &'a str, data: &'a [T]) -> Self {
        Tensor {
            name,
            dtype: T::DTYPE,
            shape: Cow::Owned(vec![data.len()]),
            memory: Memory::Host(bytemuck::cast_slice(data)),
        }
    }

    /// A view of host bytes holding a tensor of `dtype` and `shape`.
    pub fn from_bytes(
        name: &'a str,
        dtype: DType,
        shape: impl Into<Cow<'a, [usize]>>,
        bytes: &'a [u8],
    ) -> Result<Self> {
        let shape = shape.into();
        check_len(name, dtype, &shape, bytes.len())?;
        Ok(Tensor {
            name,
            dtype,
            shape,
            memory: Memory::Host(bytes),
        })
    }

    /// A view of device memory holding a tensor of `dtype` and `shape`.
    pub fn from_device(
        name: &'a str,
        dtype: DType,
        shape: impl Into<Cow<'a, [usize]>>,
        buffer: DeviceBuffer<'a>,
    ) -> Result<Self> {
        let shape = shape.into();
        check_len(name, dtype, &shape, buffer.len())?;
        Ok(Tensor {
            name,
            dtype,
            shape,
            memory: Memory::Device(buffer),
        })
    }

    pub fn name(&self) -> &'a str {
        self.name
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn memory(&self) -> Memory<'a> {
        self.memory
    }

    pub fn device(&self) -> Device {
        match &self.memory {
            Memory::Host(_) => Device::Cpu,
            Memory::Device(buffer) => buffer.device(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.byte_len() / self.dtype.size()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.byte_len() == 0
    }

    /// Number of bytes.
    pub fn byte_len(&self) -> usize {
        match &self.memory {
            Memory::Host(bytes) => bytes.len(),
            Memory::Device(buffer) => buffer.len(),
        }
    }

    /// The host bytes, or `None` for device memory.
    pub fn host(&self) -> Option<&'a [u8]> {
        match self.memory {
            Memory::Host(bytes) => Some(bytes),
            Memory::Device(_) => None,
        }
    }

    /// The bytes, for a transport (`backend`) that takes host memory only: device memory
    /// is an [`Error::Unsupported`] naming the device, the rank, the operation and the
    /// tensor.
    pub fn host_for(&self, backend: &'static str, rank: usize, op: &str) -> Result<&'a [u8]> {
        self.host()
            .ok_or_else(|| host_only(backend, rank, op, self.device(), self.name()))
    }
}

impl<'a> TensorMut<'a> {
    /// A 1-D view of a typed host slice.
    pub fn from_slice<T: Element>(name: &'a str, data: &'a mut [T]) -> Self {
        TensorMut {
            name,
            dtype: T::DTYPE,
            shape: Cow::Owned(vec![data.len()]),
            memory: MemoryMut::Host(bytemuck::cast_slice_mut(data)),
        }
    }

    /// A view of host bytes holding a tensor of `dtype` and `shape`.
    pub fn from_bytes(
        name: &'a str,
        dtype: DType,
        shape: impl Into<Cow<'a, [usize]>>,
        bytes: &'a mut [u8],
    ) -> Result<Self> {
        let shape = shape.into();
        check_len(name, dtype, &shape, bytes.len())?;
        Ok(TensorMut {
            name,
            dtype,
            shape,
            memory: MemoryMut::Host(bytes),
        })
    }

    /// A view of device memory holding a tensor of `dtype` and `shape`.
    pub fn from_device(
        name: &'a str,
        dtype: DType,
        shape: impl Into<Cow<'a, [usize]>>,
        buffer: DeviceBuffer<'a>,
    ) -> Result<Self> {
        let shape = shape.into();
        check_len(name, dtype, &shape, buffer.len())?;
        Ok(TensorMut {
            name,
            dtype,
            shape,
            memory: MemoryMut::Device(buffer),
        })
    }

    /// A view of an out-of-place tensor of `dtype` and `shape` in device memory: the
    /// operation reads `input` and writes its result to `output`.
    pub fn from_device_into(
        name: &'a str,
        dtype: DType,
        shape: impl Into<Cow<'a, [usize]>>,
        input: DeviceBuffer<'a>,
        output: DeviceBuffer<'a>,
    ) -> Result<Self> {
        let shape = shape.into();
        check_len(name, dtype, &shape, input.len())?;
        check_len(name, dtype, &shape, output.len())?;
        if input.device() != output.device() {
            return Err(Error::InvalidArgument {
                rank: 0,
                op: "tensor view",
                tensor: name.into(),
                reason: format!(
                    "the input is on {} but the output on {}",
                    input.device(),
                    output.device()
                ),
            });
        }
        Ok(TensorMut {
            name,
            dtype,
            shape,
            memory: MemoryMut::DeviceInto { input, output },
        })
    }

    /// The device memory the operation reads and the one it writes (the same one for an
    /// in-place tensor), or `None` for host memory.
    pub fn device_buffers(&self) -> Option<(DeviceBuffer<'a>, DeviceBuffer<'a>)> {
        match &self.memory {
            MemoryMut::Host(_) => None,
            MemoryMut::Device(buffer) => Some((*buffer, *buffer)),
            MemoryMut::DeviceInto { input, output } => Some((*input, *output)),
        }
    }

    pub fn name(&self) -> &'a str {
        self.name
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn device(&self) -> Device {
        match &self.memory {
            MemoryMut::Host(_) => Device::Cpu,
            MemoryMut::Device(buffer) | MemoryMut::DeviceInto { output: buffer, .. } => {
                buffer.device()
            }
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.byte_len() / self.dtype.size()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.byte_len() == 0
    }

    /// Number of bytes.
    pub fn byte_len(&self) -> usize {
        match &self.memory {
            MemoryMut::Host(bytes) => bytes.len(),
            MemoryMut::Device(buffer) | MemoryMut::DeviceInto { output: buffer, .. } => {
                buffer.len()
            }
        }
    }

    pub fn memory(&mut self) -> &mut MemoryMut<'a> {
        &mut self.memory
    }

    /// The host bytes, or `None` for device memory.
    pub fn host(&self) -> Option<&[u8]> {
        match &self.memory {
            MemoryMut::Host(bytes) => Some(bytes),
            MemoryMut::Device(_) | MemoryMut::DeviceInto { .. } => None,
        }
    }

    /// The host bytes for writing, or `None` for device memory.
    pub fn host_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.memory {
            MemoryMut::Host(bytes) => Some(bytes),
            MemoryMut::Device(_) | MemoryMut::DeviceInto { .. } => None,
        }
    }

    /// The bytes, for a transport (`backend`) that takes host memory only: device memory
    /// is an [`Error::Unsupported`] naming the device, the rank, the operation and the
    /// tensor.
    pub fn host_mut_for(
        &mut self,
        backend: &'static str,
        rank: usize,
        op: &str,
    ) -> Result<&mut [u8]> {
        let (device, name) = (self.device(), self.name);
        self.host_mut()
            .ok_or_else(|| host_only(backend, rank, op, device, name))
    }

    /// A read-only view of the same tensor: what the operation reads (an out-of-place
    /// tensor's input).
    pub fn as_tensor(&self) -> Tensor<'_> {
        Tensor {
            name: self.name,
            dtype: self.dtype,
            shape: Cow::Borrowed(&self.shape),
            memory: match &self.memory {
                MemoryMut::Host(bytes) => Memory::Host(bytes),
                MemoryMut::Device(buffer) | MemoryMut::DeviceInto { input: buffer, .. } => {
                    Memory::Device(*buffer)
                }
            },
        }
    }
}

/// The name errors and traces use for a batch: its only tensor, or the first and how many
/// more, so every transport names a batch the same way.
pub fn batch_name(tensors: &[TensorMut<'_>]) -> String {
    match tensors {
        [] => "empty batch".into(),
        [one] => one.name().into(),
        [first, rest @ ..] => format!("{} (+{} more)", first.name(), rest.len()),
    }
}

/// What a transport that takes host memory only says of a tensor in device memory.
fn host_only(backend: &'static str, rank: usize, op: &str, device: Device, tensor: &str) -> Error {
    Error::Unsupported {
        backend,
        what: format!("{device} memory (rank {rank}, {op} of '{tensor}')"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_report_name_dtype_shape_and_sizes() {
        let mut data = vec![1.0f32; 6];
        let t = TensorMut::from_slice("grad.w1", &mut data);
        assert_eq!(
            (t.name(), t.dtype(), t.shape(), t.len(), t.byte_len()),
            ("grad.w1", DType::F32, &[6][..], 6, 24)
        );
        assert_eq!(t.device(), Device::Cpu);
    }

    #[test]
    fn a_batch_is_named_by_its_first_tensor_and_the_count_of_the_rest() {
        let (mut a, mut b, mut c) = ([0u8; 1], [0u8; 1], [0u8; 1]);
        let batch = [
            TensorMut::from_slice("grad.w1", &mut a),
            TensorMut::from_slice("grad.b1", &mut b),
            TensorMut::from_slice("grad.w2", &mut c),
        ];
        assert_eq!(batch_name(&batch), "grad.w1 (+2 more)");
        assert_eq!(batch_name(&batch[..1]), "grad.w1");
        assert_eq!(batch_name(&[]), "empty batch");
    }

    #[test]
    fn an_out_of_place_view_reads_its_input_and_writes_its_output() {
        // SAFETY: the views are only inspected, never dereferenced.
        let (input, output, other) = unsafe {
            (
                DeviceBuffer::cuda(0, 0x1000, 16),
                DeviceBuffer::cuda(0, 0x2000, 16),
                DeviceBuffer::cuda(1, 0x3000, 16),
            )
        };
        let t = TensorMut::from_device_into("w", DType::F32, vec![4], input, output).unwrap();
        let (read, written) = t.device_buffers().unwrap();
        assert_eq!((read.ptr(), written.ptr()), (0x1000, 0x2000));
        assert_eq!((t.device(), t.byte_len()), (Device::Cuda(0), 16));
        let err = TensorMut::from_device_into("w", DType::F32, vec![4], input, other).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rank 0: invalid tensor view of tensor 'w': the input is on cuda:0 but the output on cuda:1"
        );
    }

    #[test]
    fn a_shape_that_does_not_fit_the_buffer_is_refused_with_both_sizes() {
        let bytes = [0u8; 10];
        let err = Tensor::from_bytes("w", DType::F32, vec![2, 2], &bytes).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rank 0: invalid tensor view of tensor 'w': shape [2, 2] of f32 needs 16 bytes but the buffer holds 10"
        );
    }
}
