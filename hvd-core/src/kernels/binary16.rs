//! f16, computed in f32. The reduction, which runs once per contributing rank, uses the
//! F16C instructions directly where the CPU has them; everything else goes through `half`'s
//! slice conversions in stack chunks (which use F16C too, but one call per eight elements).
//! Widening is exact, so this is the same arithmetic as converting element by element.

use half::f16;
use half::slice::HalfFloatSliceExt;

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
use super::f16c;
use super::fast::Kernels;
use crate::ReduceOp;

/// Elements per chunk: the f32 copies stay in L1.
const CHUNK: usize = 256;

impl Kernels for f16 {
    #[inline(always)]
    fn reduce(op: ReduceOp, acc: &mut [f16], src: &[f16]) {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        if f16c::available() {
            // SAFETY: the CPU has AVX and F16C, checked just above.
            return unsafe { f16c::reduce(op, acc, src) };
        }
        reduce_chunked(op, acc, src);
    }

    /// Multiplied in f32 by the factor rounded to f32, then rounded to f16, as the
    /// reference defines it. The f32 -> f16 step is correctly rounded both in F16C and in
    /// software, so every CPU gets the same bits.
    #[inline(always)]
    fn scale(data: &mut [f16], factor: f64) {
        let factor = factor as f32;
        let mut x = [0.0f32; CHUNK];
        for data in data.chunks_mut(CHUNK) {
            let x = &mut x[..data.len()];
            data.convert_to_f32_slice(x);
            for v in x.iter_mut() {
                *v *= factor;
            }
            data.convert_from_f32_slice(x);
        }
    }

    #[inline(always)]
    fn divide(data: &mut [f16], ranks: usize) {
        let mut x = [0.0; CHUNK];
        for data in data.chunks_mut(CHUNK) {
            let x = &mut x[..data.len()];
            data.convert_to_f32_slice(x);
            <f32 as Kernels>::divide(x, ranks);
            data.convert_from_f32_slice(x);
        }
    }
}

/// The reduction without F16C: stack chunks through `half`'s slice conversions.
#[inline(always)]
pub(super) fn reduce_chunked(op: ReduceOp, acc: &mut [f16], src: &[f16]) {
    let mut a = [0.0; CHUNK];
    let mut s = [0.0; CHUNK];
    for (acc, src) in acc.chunks_mut(CHUNK).zip(src.chunks(CHUNK)) {
        let (a, s) = (&mut a[..acc.len()], &mut s[..acc.len()]);
        acc.convert_to_f32_slice(a);
        src.convert_to_f32_slice(s);
        <f32 as Kernels>::reduce(op, a, s);
        acc.convert_from_f32_slice(a);
    }
}
