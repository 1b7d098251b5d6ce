//! Reduction kernels: the one definition of how hvd combines values, used by every
//! transport that reduces on the host.
//!
//! All functions take raw bytes plus a [`DType`], accept buffers at any alignment, and
//! process `min(len)` whole elements of their arguments. Semantics are documented on
//! [`ReduceOp`] and [`Reduction`], with one refinement: float `Min`/`Max` order -0 below
//! +0 (IEEE 754-2019 `minimumNumber`/`maximumNumber`), where `f32::min` may return either,
//! so results do not depend on the order in which ranks are combined.
//!
//! The kernels are plain loops that the compiler vectorises, compiled for each x86
//! instruction set worth having and chosen at run time (AVX-512, AVX2 with F16C, or the
//! baseline), and tested bit for bit against an element-by-element reference.

mod bfloat16;
mod binary16;
pub mod cast;
mod cpu;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod f16c;
mod fast;
mod lanes;
mod logical;
#[cfg(test)]
mod scalar;
#[cfg(test)]
mod tests;
mod typed;

use self::cpu::Isa;
use crate::{DType, ReduceOp, Reduction};

/// `acc[i] = acc[i] (op) src[i]` for every element. `Average` combines as `Sum`; divide
/// with [`finish`] once every contribution is in.
pub fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    Isa::best().reduce_into(dtype, op.combining_op(), acc, src);
}

/// Multiplies every element by `factor`: f64 in f64, f32 in f32 (the factor rounded to
/// f32), f16 and bf16 in f32, integers through `f64`, truncated toward zero, saturating.
/// A factor of exactly 1.0 is a no-op.
pub fn scale(dtype: DType, data: &mut [u8], factor: f64) {
    if factor != 1.0 {
        Isa::best().scale(dtype, data, factor);
    }
}

/// Divides every element by `ranks` (integers truncated toward zero).
pub fn divide(dtype: DType, data: &mut [u8], ranks: usize) {
    if ranks != 1 {
        Isa::best().divide(dtype, data, ranks);
    }
}

/// Applies the reduction's prescale factor to one rank's contribution.
pub fn prescale(dtype: DType, reduction: Reduction, data: &mut [u8]) {
    scale(dtype, data, reduction.prescale);
}

/// Turns the combined contributions of `ranks` ranks into the final result: divides for
/// `Average`, then applies the postscale factor.
pub fn finish(dtype: DType, reduction: Reduction, ranks: usize, data: &mut [u8]) {
    if reduction.op == ReduceOp::Average {
        divide(dtype, data, ranks);
    }
    scale(dtype, data, reduction.postscale);
}
