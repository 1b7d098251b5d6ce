//! Tensors in CUDA memory that hvd allocates itself (feature `nccl`): for programs that
//! hand the runtime device memory without a framework (benchmarks, a custom kernel's
//! output). Frameworks implement [`Buffer`] over their own device tensors instead, as
//! `hvd::candle` (feature `candle`) does.

use std::marker::PhantomData;
use std::sync::Arc;

use hvd_core::{DType, Device, DeviceBlock, DeviceBuffer, DeviceMemory, Element, Result};
use hvd_nccl::{CudaMemory, NcclConfig};
use hvd_runtime::Buffer;

/// The memory of the CUDA device of rank `rank` with local rank `local_rank` (the one
/// NCCL uses: `HVD_NCCL_DEVICE`, else the local rank modulo the devices this process
/// sees), with a stream of its own.
pub fn memory(rank: usize, local_rank: usize) -> Result<Arc<dyn DeviceMemory>> {
    let config = NcclConfig::from_env()?;
    let ordinal = hvd_nccl::device_of(&config, local_rank)?;
    let memory: Arc<dyn DeviceMemory> = CudaMemory::new(&config, ordinal, rank)?;
    Ok(memory)
}

/// A tensor of `T` in device memory. Its contents are written on its memory's stream;
/// collectives wait for that work on the device, and a result handed back is complete.
#[derive(Debug)]
pub struct DeviceVec<T> {
    /// The allocation, or why it failed (a result the runtime made for an allgather,
    /// which cannot fail in place and reports it when it uses the tensor).
    block: std::result::Result<DeviceBlock, hvd_core::Error>,
    memory: Arc<dyn DeviceMemory>,
    shape: Vec<usize>,
    _element: PhantomData<T>,
}

impl<T: Element> DeviceVec<T> {
    /// A 1-D tensor holding `values`.
    pub fn from_slice(memory: &Arc<dyn DeviceMemory>, values: &[T]) -> Result<DeviceVec<T>> {
        let block = DeviceBlock::with_contents(memory, bytemuck::cast_slice(values))?;
        Ok(DeviceVec {
            block: Ok(block),
            memory: memory.clone(),
            shape: vec![values.len()],
            _element: PhantomData,
        })
    }

    /// A tensor of `shape` holding zeros.
    pub fn zeros(memory: &Arc<dyn DeviceMemory>, shape: &[usize]) -> Result<DeviceVec<T>> {
        let bytes = shape.iter().product::<usize>() * T::DTYPE.size();
        let block = DeviceBlock::with_contents(memory, &vec![0u8; bytes])?;
        Ok(DeviceVec {
            block: Ok(block),
            memory: memory.clone(),
            shape: shape.to_vec(),
            _element: PhantomData,
        })
    }

    /// The elements, copied to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let bytes = self.block.as_ref().map_err(Clone::clone)?.contents()?;
        let mut values = vec![T::zeroed(); bytes.len() / T::DTYPE.size()];
        bytemuck::cast_slice_mut(&mut values).copy_from_slice(&bytes);
        Ok(values)
    }

    /// The memory it lives in.
    pub fn memory(&self) -> &Arc<dyn DeviceMemory> {
        &self.memory
    }
}

impl<T: Element> Buffer for DeviceVec<T> {
    fn dtype(&self) -> DType {
        T::DTYPE
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
        DeviceVec::zeros(&self.memory, shape).unwrap_or_else(|e| DeviceVec {
            block: Err(e),
            memory: self.memory.clone(),
            shape: shape.to_vec(),
            _element: PhantomData,
        })
    }
    fn device(&self) -> Device {
        self.memory.device()
    }
    fn device_memory(&self) -> Option<DeviceBuffer<'_>> {
        self.block.as_ref().ok().map(DeviceBlock::buffer)
    }
}
