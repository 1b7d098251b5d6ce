//! Tensor memory the runtime reads and writes in place: a framework tensor's bytes seen
//! through a pointer, or bytes hvd owns (a copy of a DLPack tensor, or a result whose
//! size differs), always 64-byte aligned.

use std::ptr::NonNull;

use hvd::{Buffer, DType};
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
            Bytes::Foreign { .. } => None,
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
        }
    }

    fn zeroed(&self, shape: &[usize]) -> Self {
        TensorMemory {
            dtype: self.dtype,
            shape: shape.to_vec(),
            bytes: Bytes::Owned(AlignedBytes::zeroed(
                shape.iter().product::<usize>() * self.dtype.size(),
            )),
        }
    }
}
