//! The fast kernels for every dtype, written portably: they vectorise for whatever
//! instruction set they are compiled for. Everything here, closures included, is
//! `#[inline(always)]` so that [`super::cpu`] can compile it a second time, inlined into a
//! function with a wider instruction set enabled: a function that is not inlined there is
//! compiled for the baseline only.

use half::{bf16, f16};

use super::{logical, typed};
use crate::{DType, ReduceOp};

/// The fast kernels of one element type, over typed slices of equal length.
pub(super) trait Kernels: bytemuck::Pod {
    /// `acc[i] = acc[i] (op) src[i]`; `Average` combines as `Sum`.
    fn reduce(op: ReduceOp, acc: &mut [Self], src: &[Self]);
    fn scale(data: &mut [Self], factor: f64);
    fn divide(data: &mut [Self], ranks: usize);
}

/// Calls `$f::<T>` with the element type `T` of a (non-bool) dtype.
macro_rules! by_dtype {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            DType::U8 => $f::<u8>($($arg),*),
            DType::I8 => $f::<i8>($($arg),*),
            DType::U16 => $f::<u16>($($arg),*),
            DType::I16 => $f::<i16>($($arg),*),
            DType::I32 => $f::<i32>($($arg),*),
            DType::I64 => $f::<i64>($($arg),*),
            DType::F16 => $f::<f16>($($arg),*),
            DType::BF16 => $f::<bf16>($($arg),*),
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            DType::Bool => unreachable!("bool is handled before dispatch"),
        }
    };
}

#[inline(always)]
pub(super) fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    if dtype == DType::Bool {
        return logical::reduce(op, acc, src);
    }
    by_dtype!(dtype, reduce_typed, op, acc, src)
}

#[inline(always)]
pub(super) fn scale(dtype: DType, data: &mut [u8], factor: f64) {
    if dtype == DType::Bool {
        return logical::scale(data, factor);
    }
    by_dtype!(dtype, scale_typed, data, factor)
}

/// Bool is left as it is: average is refused for bool.
#[inline(always)]
pub(super) fn divide(dtype: DType, data: &mut [u8], ranks: usize) {
    if dtype == DType::Bool {
        return;
    }
    by_dtype!(dtype, divide_typed, data, ranks)
}

#[inline(always)]
fn reduce_typed<T: Kernels>(op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    typed::zip::<T>(
        acc,
        src,
        #[inline(always)]
        |a, s| T::reduce(op, a, s),
    );
}

#[inline(always)]
fn scale_typed<T: Kernels>(data: &mut [u8], factor: f64) {
    typed::map::<T>(
        data,
        #[inline(always)]
        |d| T::scale(d, factor),
    );
}

#[inline(always)]
fn divide_typed<T: Kernels>(data: &mut [u8], ranks: usize) {
    typed::map::<T>(
        data,
        #[inline(always)]
        |d| T::divide(d, ranks),
    );
}
