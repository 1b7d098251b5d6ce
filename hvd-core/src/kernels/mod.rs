//! Reduction kernels: the one definition of how hvd combines values, used by every
//! transport that reduces on the host.
//!
//! All functions take raw bytes plus a [`DType`], accept buffers at any alignment, and
//! process `min(len)` whole elements of their arguments. Semantics are documented on
//! [`ReduceOp`] and [`Reduction`].

mod scalar;

use crate::{DType, ReduceOp, Reduction};

/// `acc[i] = acc[i] (op) src[i]` for every element. `Average` combines as `Sum`; divide
/// with [`finish`] once every contribution is in.
pub fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    scalar::reduce_into(dtype, op.combining_op(), acc, src);
}

/// Multiplies every element by `factor` (integers through `f64`, truncated toward zero,
/// saturating). A factor of exactly 1.0 is a no-op.
pub fn scale(dtype: DType, data: &mut [u8], factor: f64) {
    if factor != 1.0 {
        scalar::scale(dtype, data, factor);
    }
}

/// Divides every element by `ranks` (integers truncated toward zero).
pub fn divide(dtype: DType, data: &mut [u8], ranks: usize) {
    if ranks != 1 {
        scalar::divide(dtype, data, ranks);
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
