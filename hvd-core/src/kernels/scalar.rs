//! Plain element-by-element kernels: the obviously correct reference.

use half::{bf16, f16};

use crate::{DType, ReduceOp};

/// Arithmetic that the reference kernels need from an element type.
pub(crate) trait Arith: bytemuck::Pod {
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    fn scale(self, factor: f64) -> Self;
    fn divide(self, ranks: usize) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Average => self.wrapping_add(other),
                    ReduceOp::Product => self.wrapping_mul(other),
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                }
            }
            fn scale(self, factor: f64) -> Self {
                (self as f64 * factor) as $t
            }
            fn divide(self, ranks: usize) -> Self {
                // i64::MIN / -1 cannot happen: ranks is positive. Division in i128 keeps
                // every dtype's range exact.
                (self as i128 / ranks as i128) as $t
            }
        }
    )*};
}
int_arith!(u8, i8, u16, i16, i32, i64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Average => self + other,
                    ReduceOp::Product => self * other,
                    // A number beats NaN; -0 is below +0, which `f32::min` leaves open.
                    ReduceOp::Min => match (self.is_nan(), other.is_nan()) {
                        (_, true) => self,
                        (true, false) => other,
                        _ if self == other => if self.is_sign_negative() { self } else { other },
                        _ => self.min(other),
                    },
                    ReduceOp::Max => match (self.is_nan(), other.is_nan()) {
                        (_, true) => self,
                        (true, false) => other,
                        _ if self == other => if self.is_sign_positive() { self } else { other },
                        _ => self.max(other),
                    },
                }
            }
            fn scale(self, factor: f64) -> Self {
                self * factor as $t
            }
            fn divide(self, ranks: usize) -> Self {
                self / ranks as $t
            }
        }
    )*};
}
float_arith!(f32, f64);

macro_rules! half_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                <$t>::from_f32(self.to_f32().combine(other.to_f32(), op))
            }
            fn scale(self, factor: f64) -> Self {
                // In f32, as Horovod scales f16 on the CPU: accurate, and f32 -> half is
                // correctly rounded in software and with F16C alike.
                <$t>::from_f32(self.to_f32() * factor as f32)
            }
            fn divide(self, ranks: usize) -> Self {
                <$t>::from_f32(self.to_f32() / ranks as f32)
            }
        }
    )*};
}
half_arith!(f16, bf16);

/// Applies `f` to typed copies of the buffers, so that any alignment works.
fn typed<T: Arith>(acc: &mut [u8], src: &[u8], mut f: impl FnMut(T, T) -> T) {
    let width = size_of::<T>();
    for (a, s) in acc.chunks_exact_mut(width).zip(src.chunks_exact(width)) {
        let x: T = bytemuck::pod_read_unaligned(a);
        let y: T = bytemuck::pod_read_unaligned(s);
        a.copy_from_slice(bytemuck::bytes_of(&f(x, y)));
    }
}

fn typed_map<T: Arith>(data: &mut [u8], mut f: impl FnMut(T) -> T) {
    let width = size_of::<T>();
    for a in data.chunks_exact_mut(width) {
        let x: T = bytemuck::pod_read_unaligned(a);
        a.copy_from_slice(bytemuck::bytes_of(&f(x)));
    }
}

fn bool_combine(a: u8, b: u8, op: ReduceOp) -> u8 {
    let (a, b) = (a != 0, b != 0);
    let r = match op {
        ReduceOp::Sum | ReduceOp::Max | ReduceOp::Average => a || b,
        ReduceOp::Min | ReduceOp::Product => a && b,
    };
    r as u8
}

macro_rules! dispatch {
    ($dtype:expr, $f:ident, $($args:expr),*) => {
        match $dtype {
            DType::U8 => $f::<u8>($($args),*),
            DType::I8 => $f::<i8>($($args),*),
            DType::U16 => $f::<u16>($($args),*),
            DType::I16 => $f::<i16>($($args),*),
            DType::I32 => $f::<i32>($($args),*),
            DType::I64 => $f::<i64>($($args),*),
            DType::F16 => $f::<f16>($($args),*),
            DType::BF16 => $f::<bf16>($($args),*),
            DType::F32 => $f::<f32>($($args),*),
            DType::F64 => $f::<f64>($($args),*),
            DType::Bool => unreachable!("bool is handled before dispatch"),
        }
    };
}

fn reduce_typed<T: Arith>(acc: &mut [u8], src: &[u8], op: ReduceOp) {
    typed::<T>(acc, src, |a, b| a.combine(b, op));
}

fn scale_typed<T: Arith>(data: &mut [u8], factor: f64) {
    typed_map::<T>(data, |x| x.scale(factor));
}

fn divide_typed<T: Arith>(data: &mut [u8], ranks: usize) {
    typed_map::<T>(data, |x| x.divide(ranks));
}

/// `acc[i] = acc[i] (op) src[i]`, one element at a time.
pub(crate) fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    if dtype == DType::Bool {
        for (a, s) in acc.iter_mut().zip(src) {
            *a = bool_combine(*a, *s, op);
        }
        return;
    }
    dispatch!(dtype, reduce_typed, acc, src, op)
}

/// Multiplies every element by `factor`; bool normalises to 0/1 (a factor of 0 clears).
pub(crate) fn scale(dtype: DType, data: &mut [u8], factor: f64) {
    if dtype == DType::Bool {
        for b in data {
            *b = (*b != 0 && factor != 0.0) as u8;
        }
        return;
    }
    dispatch!(dtype, scale_typed, data, factor)
}

/// Divides every element by `ranks`; bool is left as it is (average is refused for bool).
pub(crate) fn divide(dtype: DType, data: &mut [u8], ranks: usize) {
    if dtype == DType::Bool {
        return;
    }
    dispatch!(dtype, divide_typed, data, ranks)
}
