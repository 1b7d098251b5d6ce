//! Gradient compression in the engine: a batch's float tensors are narrowed into 16-bit
//! wire buffers before the middleware stack (so Tensor Fusion packs and the transport
//! moves half the bytes) and widened back into the caller's tensors after.

use hvd_core::kernels::cast;
use hvd_core::{DType, Result, TensorMut};

use super::buffer::AnyBuffer;

/// Wire buffers kept from batch to batch: a training step compresses the same tensors
/// every time, and reusing the memory spares faulting in fresh pages for each.
#[derive(Default)]
pub(crate) struct WireBuffers {
    pool: Vec<Vec<u8>>,
}

impl WireBuffers {
    /// One spare buffer per tensor of a batch of `len`.
    pub fn for_batch(&mut self, len: usize) -> &mut [Vec<u8>] {
        if self.pool.len() < len {
            self.pool.resize_with(len, Vec::new);
        }
        &mut self.pool[..len]
    }
}

/// Narrows `buffer` into `spare` as `wire` elements; returns the view the stack reduces.
pub(crate) fn narrowed<'a>(
    name: &'a str,
    buffer: &dyn AnyBuffer,
    wire: DType,
    spare: &'a mut Vec<u8>,
) -> Result<TensorMut<'a>> {
    let len = buffer.bytes().len() / buffer.dtype().size() * wire.size();
    if spare.len() < len {
        spare.resize(len, 0);
    }
    let out = &mut spare[..len];
    cast::narrow(buffer.dtype(), buffer.bytes(), wire, out);
    TensorMut::from_bytes(name, wire, buffer.shape(), out)
}

/// Widens the reduced `wire` elements of `spare` back into `buffer`.
pub(crate) fn widen_into(buffer: &mut dyn AnyBuffer, wire: DType, spare: &[u8]) {
    let dtype = buffer.dtype();
    cast::widen(wire, spare, dtype, buffer.bytes_mut());
}
