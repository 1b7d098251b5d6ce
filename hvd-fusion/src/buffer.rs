//! The persistent fusion buffer: host memory that packs are copied into, allocated once,
//! grown on demand, and reused by every call.

use crate::pack::ALIGN;

/// A growable byte buffer whose usable region starts on an [`ALIGN`]-byte boundary.
///
/// The kernels accept any alignment but take their fast path on aligned data, and packs
/// start at multiples of [`ALIGN`] inside the buffer, so the base must be aligned too.
/// The allocation carries `ALIGN - 1` spare bytes and the region starts at the first
/// aligned address in it: no `unsafe`, no custom allocator.
#[derive(Debug, Default)]
pub(crate) struct FusionBuffer {
    bytes: Vec<u8>,
}

impl FusionBuffer {
    /// Bytes usable without growing.
    pub fn capacity(&self) -> usize {
        self.bytes.len().saturating_sub(ALIGN - 1)
    }

    /// The first `len` bytes of the aligned region, growing the buffer when it is too
    /// small. Contents are unspecified: every caller overwrites what it reads.
    pub fn region(&mut self, len: usize) -> &mut [u8] {
        if len == 0 {
            // An empty region needs no memory (and an empty Vec has no aligned address).
            return &mut [];
        }
        if self.capacity() < len {
            tracing::debug!(bytes = len, "growing the fusion buffer");
            // A fresh allocation: nothing in the old one is worth copying.
            self.bytes = vec![0; len + ALIGN - 1];
        }
        let start = self.bytes.as_ptr().addr().wrapping_neg() % ALIGN;
        &mut self.bytes[start..start + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_aligned_and_growth_is_on_demand() {
        let mut buffer = FusionBuffer::default();
        assert_eq!(buffer.capacity(), 0);
        for len in [0, 1, 100, 64, 4096, 10, 4097] {
            let region = buffer.region(len);
            assert_eq!(region.len(), len);
            assert!(len == 0 || region.as_ptr().addr() % ALIGN == 0);
        }
        assert_eq!(buffer.capacity(), 4097, "grown to the largest request only");
    }
}
