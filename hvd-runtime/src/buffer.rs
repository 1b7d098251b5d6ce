//! Owned tensors that go into a collective and come back out of its handle.
//!
//! [`Buffer`] is the plug for tensor types: `Vec<T>` (1-D) and [`Shaped<T>`] (any shape)
//! for every element type, [`Bools`] for bool tensors, and whatever a framework
//! integration implements, on the host or (through its device view) on a GPU.

use hvd_core::{DType, Device, DeviceBuffer, Element};

/// An owned host tensor the runtime can read, write, and create more of.
pub trait Buffer: Send + 'static {
    /// The element type.
    fn dtype(&self) -> DType;
    /// The shape; the product of the dims is the element count.
    fn shape(&self) -> Vec<usize>;
    /// The elements as bytes.
    fn bytes(&self) -> &[u8];
    /// The elements as writable bytes; results are written here.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// A zeroed buffer of the same kind with another shape, for results whose size
    /// differs from the input (allgather, alltoall, reducescatter).
    fn zeroed(&self, shape: &[usize]) -> Self
    where
        Self: Sized;
    /// Where the elements live. Host memory (the default) is read and written through
    /// `bytes`; a tensor on a device (a GPU) names its device and gives its memory
    /// through [`device_memory`](Self::device_memory), and its `bytes` are empty.
    fn device(&self) -> Device {
        Device::Cpu
    }
    /// The elements' memory on [`device`](Self::device); `None` (the default) for host
    /// memory. The runtime writes through it only while it holds the buffer mutably.
    fn device_memory(&self) -> Option<DeviceBuffer<'_>> {
        None
    }
}

impl<T: Element> Buffer for Vec<T> {
    fn dtype(&self) -> DType {
        T::DTYPE
    }
    fn shape(&self) -> Vec<usize> {
        vec![self.len()]
    }
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self)
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        vec![T::zeroed(); shape.iter().product()]
    }
}

/// A tensor of any shape over a `Vec<T>`, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaped<T> {
    pub data: Vec<T>,
    pub shape: Vec<usize>,
}

impl<T: Element> Shaped<T> {
    /// Pairs `data` with `shape`; `None` when the shape does not hold `data.len()` elements.
    pub fn new(data: Vec<T>, shape: Vec<usize>) -> Option<Self> {
        (shape.iter().product::<usize>() == data.len()).then_some(Shaped { data, shape })
    }
}

impl<T: Element> Buffer for Shaped<T> {
    fn dtype(&self) -> DType {
        T::DTYPE
    }
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.data)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.data)
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        Shaped {
            data: vec![T::zeroed(); shape.iter().product()],
            shape: shape.to_vec(),
        }
    }
}

/// A 1-D bool tensor, one byte per element (0 false, 1 true).
///
/// Bool tensors do not travel as `Vec<bool>` because a byte from another rank that is
/// neither 0 nor 1 would make a `bool` undefined behaviour; results written by hvd's
/// kernels are always 0 or 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bools(pub Vec<u8>);

impl Bools {
    pub fn from_bools(values: &[bool]) -> Self {
        Bools(values.iter().map(|b| *b as u8).collect())
    }

    pub fn to_bools(&self) -> Vec<bool> {
        self.0.iter().map(|b| *b != 0).collect()
    }
}

impl Buffer for Bools {
    fn dtype(&self) -> DType {
        DType::Bool
    }
    fn shape(&self) -> Vec<usize> {
        vec![self.0.len()]
    }
    fn bytes(&self) -> &[u8] {
        &self.0
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        Bools(vec![0; shape.iter().product()])
    }
}

/// A [`Buffer`] whose concrete type is erased while it is inside the runtime.
pub(crate) trait AnyBuffer: Send {
    fn dtype(&self) -> DType;
    fn shape(&self) -> Vec<usize>;
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
    fn device(&self) -> Device;
    fn device_memory(&self) -> Option<DeviceBuffer<'_>>;
}

impl<B: Buffer> AnyBuffer for B {
    fn dtype(&self) -> DType {
        Buffer::dtype(self)
    }
    fn shape(&self) -> Vec<usize> {
        Buffer::shape(self)
    }
    fn bytes(&self) -> &[u8] {
        Buffer::bytes(self)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        Buffer::bytes_mut(self)
    }
    fn device(&self) -> Device {
        Buffer::device(self)
    }
    fn device_memory(&self) -> Option<DeviceBuffer<'_>> {
        Buffer::device_memory(self)
    }
}

/// Bytes of any dtype and shape: the zeros a joined rank contributes.
pub(crate) struct RawBuffer {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl RawBuffer {
    pub fn zeroed(dtype: DType, shape: &[usize]) -> Self {
        RawBuffer {
            dtype,
            shape: shape.to_vec(),
            bytes: vec![0; shape.iter().product::<usize>() * dtype.size()],
        }
    }
}

impl Buffer for RawBuffer {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        RawBuffer::zeroed(self.dtype, shape)
    }
}
