//! A growable run of numbers whose first element sits on a 64-byte boundary. TensorFlow
//! adopts a batch's memory as a tensor without a copy only at that alignment (its
//! kernels abort the process on less), and a cache line suits everyone else. The
//! allocator gives large blocks 16-byte aligned, so the run starts a few elements into
//! its `Vec`.

/// The alignment of the first element.
pub(crate) const ALIGN: usize = 64;

/// Elements of `T` (`f32`, `i64`: plain numbers whose size is their alignment and divides
/// [`ALIGN`]) from a 64-byte boundary on.
#[derive(Debug, Default)]
pub(crate) struct Aligned<T> {
    vec: Vec<T>,
    /// The elements before the boundary.
    pad: usize,
}

impl<T: Copy + Default> Aligned<T> {
    /// Empties it, with room for `len` elements, so that growing to `len` allocates
    /// nothing.
    pub fn reset(&mut self, len: usize) {
        self.vec.clear();
        // A boundary's worth of slack to slide the start onto it.
        self.vec.reserve(len + ALIGN / size_of::<T>());
        let address = self.vec.as_ptr() as usize;
        self.pad = (address.next_multiple_of(ALIGN) - address) / size_of::<T>();
        self.vec.resize(self.pad, T::default());
        debug_assert!((self.as_slice().as_ptr() as usize).is_multiple_of(ALIGN));
    }

    pub fn len(&self) -> usize {
        self.vec.len() - self.pad
    }

    pub fn as_slice(&self) -> &[T] {
        &self.vec[self.pad..]
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.vec[self.pad..]
    }

    /// `n` more elements (set to the default), to be written through the slice returned.
    pub fn grow(&mut self, n: usize) -> &mut [T] {
        self.reserve(n);
        let start = self.vec.len();
        self.vec.resize(start + n, T::default());
        &mut self.vec[start..]
    }

    pub fn push(&mut self, value: T) {
        self.reserve(1);
        self.vec.push(value);
    }

    /// Keeps the first `len` elements.
    pub fn truncate(&mut self, len: usize) {
        self.vec.truncate(self.pad + len);
    }

    /// Room for `n` more without a reallocation, which would move the start off the
    /// boundary: when short, the elements move to a new aligned block.
    fn reserve(&mut self, n: usize) {
        if self.vec.len() + n <= self.vec.capacity() {
            return;
        }
        let mut bigger = Aligned::default();
        bigger.reset((self.len() + n).max(2 * self.len()));
        bigger.vec.extend_from_slice(self.as_slice());
        *self = bigger;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aligned<T>(run: &Aligned<T>) -> bool
    where
        T: Copy + Default,
    {
        (run.as_slice().as_ptr() as usize).is_multiple_of(ALIGN)
    }

    #[test]
    fn the_first_element_stays_on_the_boundary_however_the_run_grows() {
        let mut floats = Aligned::<f32>::default();
        floats.reset(3);
        assert!(aligned(&floats) && floats.len() == 0);
        floats.grow(2).copy_from_slice(&[1.0, 2.0]);
        // Past the room reserved: moved to a new block, still aligned, contents kept.
        for i in 0..1000 {
            floats.push(i as f32);
        }
        assert!(aligned(&floats));
        assert_eq!(floats.len(), 1002);
        assert_eq!(&floats.as_slice()[..3], &[1.0, 2.0, 0.0]);
        floats.truncate(2);
        assert_eq!(floats.as_slice(), &[1.0, 2.0]);

        let mut labels = Aligned::<i64>::default();
        for len in [0, 1, 7, 4096] {
            labels.reset(len);
            labels.grow(len);
            assert!(aligned(&labels) && labels.len() == len);
        }
    }
}
