//! Heap bytes aligned to 64: the alignment TensorFlow demands of every buffer it is
//! handed (it aborts the process on anything less), and a cache line everywhere else.

/// One cache line; a `Vec` of these is 64-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; ALIGN]);

/// The alignment of [`AlignedBytes`].
pub(crate) const ALIGN: usize = 64;

/// Zero-initialised bytes whose first byte sits on a 64-byte boundary (an empty one
/// too: its pointer is dangling but aligned, never null).
pub(crate) struct AlignedBytes {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        AlignedBytes {
            lines: vec![Line([0; ALIGN]); len.div_ceil(ALIGN)],
            len,
        }
    }

    /// A copy of `bytes`.
    pub fn copy_of(bytes: &[u8]) -> Self {
        let mut copy = Self::zeroed(bytes.len());
        copy.as_mut_slice().copy_from_slice(bytes);
        copy
    }

    /// The first byte's address.
    pub fn as_ptr(&self) -> *const u8 {
        self.lines.as_ptr().cast()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `lines` holds at least `len` initialised bytes, and a `Line` is plain
        // bytes with no padding.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
    }
}
