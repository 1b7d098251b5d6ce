//! Tensor memory the runtime reads and writes in place: a framework tensor's bytes seen
//! through a pointer (host memory, or a CUDA device's), or memory hvd owns (a copy of a
//! DLPack tensor, or a result whose size differs; host bytes 64-byte aligned).

use std::ptr::NonNull;
use std::sync::Arc;

use hvd::core::{DeviceBlock, DeviceBuffer, DeviceMemory, Ready};
use hvd::{Buffer, DType, Device};
use pyo3::{Py, PyAny};

use crate::aligned::AlignedBytes;

/// A tensor as the runtime sees it. Implements [`Buffer`], so it goes through every
/// collective like any other tensor type.
pub(crate) struct TensorMemory {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Bytes,
}

enum Bytes {
    /// A Python tensor's memory; `owner` keeps that tensor alive while the runtime holds
    /// the pointer, even when Python drops its handle without waiting.
    Foreign {
        ptr: NonNull<u8>,
        len: usize,
        _owner: Py<PyAny>,
    },
    Owned(AlignedBytes),
    /// A framework's CUDA tensor, written by the work queued before `ready` (an event
    /// recorded on the framework's stream, which `_owner` also keeps alive); `memory` is
    /// its device's, for results of another shape.
    Device {
        ptr: u64,
        len: usize,
        ready: Ready,
        memory: Arc<dyn DeviceMemory>,
        _owner: Py<PyAny>,
    },
    /// Device memory hvd made for a result, or why it could not (reported when the
    /// runtime uses it: `zeroed` cannot fail).
    DeviceOwned {
        block: Result<DeviceBlock, hvd::Error>,
        memory: Arc<dyn DeviceMemory>,
    },
}

// SAFETY: the foreign memory is only reached through `&self`/`&mut self`, so it moves to
// the runtime's thread with the buffer and is used by one thread at a time; the contract
// of `TensorMemory::foreign` keeps Python from touching it meanwhile. `Py<PyAny>` is Send.
unsafe impl Send for TensorMemory {}

impl TensorMemory {
    /// Views `len` bytes at `ptr`, a contiguous host tensor of `dtype` and `shape`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as `owner` is
    /// alive, and nothing else may read or write them until the collective's handle has
    /// been waited on (the Python front holds the tensor until then).
    pub unsafe fn foreign(
        ptr: usize,
        len: usize,
        dtype: DType,
        shape: Vec<usize>,
        owner: Py<PyAny>,
    ) -> Self {
        let bytes = match NonNull::new(ptr as *mut u8) {
            Some(ptr) if len > 0 => Bytes::Foreign {
                ptr,
                len,
                _owner: owner,
            },
            // An empty tensor may have no memory at all (a null pointer).
            _ => Bytes::Owned(AlignedBytes::zeroed(0)),
        };
        TensorMemory {
            dtype,
            shape,
            bytes,
        }
    }

    /// Views `len` bytes at device address `ptr` of `memory`'s device, a contiguous CUDA
    /// tensor of `dtype` and `shape` written by the work queued before `ready`.
    ///
    /// # Safety
    /// `ptr` must be device memory valid for reads and writes of `len` bytes for as long as
    /// `owner` is alive (and `ready`'s event too), and nothing else may use them until the
    /// collective's handle has been waited on.
    pub unsafe fn device(
        ptr: u64,
        len: usize,
        dtype: DType,
        shape: Vec<usize>,
        ready: Ready,
        memory: Arc<dyn DeviceMemory>,
        owner: Py<PyAny>,
    ) -> Self {
        TensorMemory {
            dtype,
            shape,
            bytes: Bytes::Device {
                ptr,
                len,
                ready,
                memory,
                _owner: owner,
            },
        }
    }

    /// A tensor in memory hvd owns.
    pub fn owned(dtype: DType, shape: Vec<usize>, bytes: AlignedBytes) -> Self {
        TensorMemory {
            dtype,
            shape,
            bytes: Bytes::Owned(bytes),
        }
    }

    /// The shape of the tensor.
    pub fn dims(&self) -> &[usize] {
        &self.shape
    }

    /// The dtype, shape and bytes of a tensor in memory hvd owns; None for a view of a
    /// framework's tensor.
    pub fn into_owned(self) -> Option<(DType, Vec<usize>, AlignedBytes)> {
        match self.bytes {
            Bytes::Owned(bytes) => Some((self.dtype, self.shape, bytes)),
            _ => None,
        }
    }

    /// The dtype, shape and device memory of a result hvd made on a device; None for any
    /// other memory.
    pub fn into_device_owned(self) -> Option<hvd::Result<(DType, Vec<usize>, DeviceBlock)>> {
        match self.bytes {
            Bytes::DeviceOwned { block, .. } => Some(block.map(|b| (self.dtype, self.shape, b))),
            _ => None,
        }
    }

    /// Whether the tensor is in a device's memory.
    pub fn on_device(&self) -> bool {
        matches!(self.bytes, Bytes::Device { .. } | Bytes::DeviceOwned { .. })
    }

    fn device_of(&self) -> Option<&Arc<dyn DeviceMemory>> {
        match &self.bytes {
            Bytes::Device { memory, .. } | Bytes::DeviceOwned { memory, .. } => Some(memory),
            _ => None,
        }
    }
}

impl Buffer for TensorMemory {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    fn bytes(&self) -> &[u8] {
        match &self.bytes {
            // SAFETY: `foreign`'s contract: `len` readable bytes at `ptr` while `_owner` lives.
            Bytes::Foreign { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
            Bytes::Owned(v) => v.as_slice(),
            // Device memory is reached through `device_memory`.
            Bytes::Device { .. } | Bytes::DeviceOwned { .. } => &[],
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.bytes {
            // SAFETY: `foreign`'s contract: `len` writable bytes at `ptr`, used by no one
            // else until the handle is waited on; `&mut self` makes this the only view.
            Bytes::Foreign { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
            Bytes::Owned(v) => v.as_mut_slice(),
            Bytes::Device { .. } | Bytes::DeviceOwned { .. } => &mut [],
        }
    }

    fn zeroed(&self, shape: &[usize]) -> Self {
        let len = shape.iter().product::<usize>() * self.dtype.size();
        let bytes = match self.device_of() {
            // A result on the input's device, never through the host, and not zeroed:
            // these results (allgather, alltoall, reducescatter) are written whole, by
            // NCCL or by the runtime's staging, so zeros would only cost an upload.
            Some(memory) => Bytes::DeviceOwned {
                block: DeviceBlock::alloc(memory, len),
                memory: memory.clone(),
            },
            None => Bytes::Owned(AlignedBytes::zeroed(len)),
        };
        TensorMemory {
            dtype: self.dtype,
            shape: shape.to_vec(),
            bytes,
        }
    }

    fn device(&self) -> Device {
        self.device_of()
            .map_or(Device::Cpu, |memory| memory.device())
    }

    fn device_memory(&self) -> Option<DeviceBuffer<'_>> {
        match &self.bytes {
            Bytes::Device {
                ptr,
                len,
                ready,
                memory,
                ..
            } => {
                let Device::Cuda(ordinal) = memory.device() else {
                    return None;
                };
                // SAFETY: `device`'s contract: `len` bytes of that device at `ptr`, used
                // by no one else while the runtime holds this buffer.
                Some(unsafe { DeviceBuffer::cuda(ordinal, *ptr, *len) }.after(*ready))
            }
            Bytes::DeviceOwned { block, .. } => block.as_ref().ok().map(DeviceBlock::buffer),
            _ => None,
        }
    }
}
