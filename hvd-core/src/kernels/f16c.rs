//! f16 reduction with the x86 F16C conversion instructions, eight elements at a time in
//! registers. `half` uses the same instructions for single values, so the results match
//! `f16::from_f32` bit for bit.

#[cfg(target_arch = "x86")]
use std::arch::x86::{_MM_FROUND_TO_NEAREST_INT, _mm256_cvtph_ps, _mm256_cvtps_ph};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_FROUND_TO_NEAREST_INT, _mm256_cvtph_ps, _mm256_cvtps_ph};

use half::f16;

use super::lanes::Lane;
use crate::ReduceOp;

/// Whether the CPU runs this module's functions (the check is a cached load).
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("f16c")
}

/// `acc[i] = acc[i] (op) src[i]`, computed in f32. `Average` combines as `Sum`.
#[target_feature(enable = "avx,f16c")]
pub(super) fn reduce(op: ReduceOp, acc: &mut [f16], src: &[f16]) {
    match op {
        ReduceOp::Sum | ReduceOp::Average => zip(acc, src, <f32 as Lane>::add),
        ReduceOp::Product => zip(acc, src, <f32 as Lane>::mul),
        ReduceOp::Min => zip(acc, src, <f32 as Lane>::min),
        ReduceOp::Max => zip(acc, src, <f32 as Lane>::max),
    }
}

#[target_feature(enable = "avx,f16c")]
fn zip(acc: &mut [f16], src: &[f16], f: impl Fn(f32, f32) -> f32) {
    let (acc8, acc_rest) = acc.as_chunks_mut::<8>();
    let (src8, src_rest) = src.as_chunks::<8>();
    for (a, s) in acc8.iter_mut().zip(src8) {
        let (x, y) = (widen(*a), widen(*s));
        *a = narrow(std::array::from_fn(|i| f(x[i], y[i])));
    }
    for (a, s) in acc_rest.iter_mut().zip(src_rest) {
        *a = f16::from_f32(f(a.to_f32(), s.to_f32()));
    }
}

#[target_feature(enable = "avx,f16c")]
fn widen(x: [f16; 8]) -> [f32; 8] {
    bytemuck::cast(_mm256_cvtph_ps(bytemuck::cast(x)))
}

#[target_feature(enable = "avx,f16c")]
fn narrow(x: [f32; 8]) -> [f16; 8] {
    bytemuck::cast(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(
        bytemuck::cast(x),
    ))
}
