//! Views byte buffers as typed slices so that kernels can be plain loops over `[T]`.
//!
//! Buffers arrive at any alignment. When every buffer is aligned for `T` (the usual case:
//! allocations and element-sized offsets into them) the kernel runs on the buffers
//! themselves. Otherwise no element of the misaligned buffer is aligned either (a size is a
//! multiple of the alignment), so there is no aligned middle to split off: the kernel runs
//! on aligned copies in stack chunks instead, which costs a copy through L1 and keeps the
//! kernel itself vectorised.

use bytemuck::Pod;

/// Elements per stack chunk: small enough for L1, big enough to amortise the loop setup.
const CHUNK: usize = 256;

fn is_aligned<T>(bytes: &[u8]) -> bool {
    bytes.as_ptr().cast::<T>().is_aligned()
}

/// Runs `kernel(acc, src)` over the whole elements that both buffers hold.
#[inline(always)]
pub(super) fn zip<T: Pod>(acc: &mut [u8], src: &[u8], mut kernel: impl FnMut(&mut [T], &[T])) {
    let len = acc.len().min(src.len()) / size_of::<T>() * size_of::<T>();
    let (acc, src) = (&mut acc[..len], &src[..len]);
    if is_aligned::<T>(acc) && is_aligned::<T>(src) {
        kernel(bytemuck::cast_slice_mut(acc), bytemuck::cast_slice(src));
        return;
    }
    let mut a = [T::zeroed(); CHUNK];
    let mut s = [T::zeroed(); CHUNK];
    let step = CHUNK * size_of::<T>();
    for (acc, src) in acc.chunks_mut(step).zip(src.chunks(step)) {
        let n = acc.len() / size_of::<T>();
        let (a, s) = (&mut a[..n], &mut s[..n]);
        bytemuck::cast_slice_mut(a).copy_from_slice(acc);
        bytemuck::cast_slice_mut(s).copy_from_slice(src);
        kernel(a, s);
        acc.copy_from_slice(bytemuck::cast_slice(a));
    }
}

/// Runs `kernel(data)` over the whole elements of the buffer.
#[inline(always)]
pub(super) fn map<T: Pod>(data: &mut [u8], mut kernel: impl FnMut(&mut [T])) {
    let len = data.len() / size_of::<T>() * size_of::<T>();
    let data = &mut data[..len];
    if is_aligned::<T>(data) {
        kernel(bytemuck::cast_slice_mut(data));
        return;
    }
    let mut d = [T::zeroed(); CHUNK];
    for data in data.chunks_mut(CHUNK * size_of::<T>()) {
        let d = &mut d[..data.len() / size_of::<T>()];
        bytemuck::cast_slice_mut(d).copy_from_slice(data);
        kernel(d);
        data.copy_from_slice(bytemuck::cast_slice(d));
    }
}
