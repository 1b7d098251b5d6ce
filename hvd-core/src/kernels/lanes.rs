//! Element-wise loops over typed slices for the integer dtypes, f32 and f64 (and, through
//! f32, bf16): one plain loop per op, with the op chosen outside it, so the compiler
//! vectorises each one.

use std::convert::identity;

use super::fast::Kernels;
use crate::ReduceOp;

/// The arithmetic of one element type, as the fast kernels need it.
pub(super) trait Lane: bytemuck::Pod {
    fn add(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
    fn max(self, other: Self) -> Self;
    fn scale(self, factor: f64) -> Self;
    /// Divides every element by `ranks`; a slice at a time because the best way to divide
    /// differs per type.
    fn divide_all(data: &mut [Self], ranks: usize);
}

/// `acc[i] = narrow(f(widen(acc[i]), widen(src[i])))`.
#[inline(always)]
fn zip_via<T: Copy, L>(
    acc: &mut [T],
    src: &[T],
    widen: impl Fn(T) -> L,
    narrow: impl Fn(L) -> T,
    f: impl Fn(L, L) -> L,
) {
    for (a, s) in acc.iter_mut().zip(src) {
        *a = narrow(f(widen(*a), widen(*s)));
    }
}

/// `acc[i] = acc[i] (op) src[i]`, computed in the lane type `L`: `widen` and `narrow`
/// convert to and from it (f32 for bf16). `Average` combines as `Sum`.
#[inline(always)]
pub(super) fn reduce_via<T: Copy, L: Lane>(
    op: ReduceOp,
    acc: &mut [T],
    src: &[T],
    widen: impl Fn(T) -> L,
    narrow: impl Fn(L) -> T,
) {
    match op {
        ReduceOp::Sum | ReduceOp::Average => zip_via(acc, src, widen, narrow, L::add),
        ReduceOp::Product => zip_via(acc, src, widen, narrow, L::mul),
        ReduceOp::Min => zip_via(acc, src, widen, narrow, L::min),
        ReduceOp::Max => zip_via(acc, src, widen, narrow, L::max),
    }
}

impl<T: Lane> Kernels for T {
    #[inline(always)]
    fn reduce(op: ReduceOp, acc: &mut [T], src: &[T]) {
        reduce_via(op, acc, src, identity, identity);
    }

    #[inline(always)]
    fn scale(data: &mut [T], factor: f64) {
        for x in data {
            *x = x.scale(factor);
        }
    }

    #[inline(always)]
    fn divide(data: &mut [T], ranks: usize) {
        T::divide_all(data, ranks);
    }
}

macro_rules! int_lane {
    ($($t:ty),*) => {$(
        impl Lane for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                Ord::min(self, other)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                Ord::max(self, other)
            }
            #[inline(always)]
            fn scale(self, factor: f64) -> Self {
                // `as` truncates toward zero and saturates, as documented.
                (self as f64 * factor) as $t
            }
            #[inline(always)]
            fn divide_all(data: &mut [Self], ranks: usize) {
                if size_of::<$t>() <= 4 {
                    // Through f64, which vectorises where integer division does not. It is
                    // exact: for |x| < 2^53 the rounded quotient is within
                    // |x / ranks| * 2^-53 < 1 / ranks of the true one, closer than any
                    // integer it could be rounded across, so truncating it truncates the
                    // true quotient. (`ranks` beyond 2^53 rounds, but then every quotient
                    // truncates to 0 either way.)
                    let d = ranks as f64;
                    for x in data {
                        *x = (*x as f64 / d) as $t;
                    }
                } else if let Ok(d) = i64::try_from(ranks) {
                    // `d` is positive, so `i64::MIN / -1` cannot happen.
                    for x in data {
                        *x = (*x as i64 / d) as $t;
                    }
                } else {
                    // Every quotient truncates to 0 here, bar `i64::MIN / 2^63`.
                    for x in data {
                        *x = (*x as i128 / ranks as i128) as $t;
                    }
                }
            }
        }
    )*};
}
int_lane!(u8, i8, u16, i16, i32, i64);

macro_rules! float_lane {
    ($($t:ty),*) => {$(
        impl Lane for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self * other
            }
            // IEEE 754-2019 minimumNumber and maximumNumber: a number beats NaN, and -0 is
            // below +0 (where `f32::min` may return either), so the result is the same
            // whatever order the ranks are combined in, and on every instruction set.
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                let keep = self < other
                    || (self == other && self.is_sign_negative())
                    || other.is_nan();
                if keep { self } else { other }
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                let keep = self > other
                    || (self == other && self.is_sign_positive())
                    || other.is_nan();
                if keep { self } else { other }
            }
            /// In the float's own precision, the factor rounded to it once.
            #[inline(always)]
            fn scale(self, factor: f64) -> Self {
                self * factor as $t
            }
            #[inline(always)]
            fn divide_all(data: &mut [Self], ranks: usize) {
                let d = ranks as $t;
                for x in data {
                    *x /= d;
                }
            }
        }
    )*};
}
float_lane!(f32, f64);
