//! The documented semantics, one small example each, through the public functions.

use half::{bf16, f16};

use crate::kernels::{divide, finish, reduce_into, scale};
use crate::{DType, ReduceOp, Reduction};

/// Reduces `src` into `acc` as `T`s and returns the result.
fn reduce<T: bytemuck::Pod>(dtype: DType, op: ReduceOp, mut acc: Vec<T>, src: &[T]) -> Vec<T> {
    reduce_into(
        dtype,
        op,
        bytemuck::cast_slice_mut(&mut acc),
        bytemuck::cast_slice(src),
    );
    acc
}

#[test]
fn integer_sum_and_product_wrap() {
    assert_eq!(reduce(DType::I8, ReduceOp::Sum, vec![100i8], &[100]), [-56]);
    assert_eq!(reduce(DType::U8, ReduceOp::Sum, vec![200u8], &[100]), [44]);
    assert_eq!(reduce(DType::U8, ReduceOp::Product, vec![16u8], &[16]), [0]);
    assert_eq!(
        reduce(DType::I64, ReduceOp::Sum, vec![i64::MAX], &[1]),
        [i64::MIN]
    );
}

#[test]
fn integer_average_truncates_the_wrapped_sum_toward_zero() {
    let mut acc = reduce(DType::I32, ReduceOp::Average, vec![-3i32, 7], &[-4, 0]);
    finish(
        DType::I32,
        Reduction::new(ReduceOp::Average),
        2,
        bytemuck::cast_slice_mut(&mut acc),
    );
    assert_eq!(acc, [-3, 3]);

    // 100 + 100 wraps to -56 in i8 before the division: -56 / 2 == -28.
    let mut acc = reduce(DType::I8, ReduceOp::Average, vec![100i8], &[100]);
    divide(DType::I8, bytemuck::cast_slice_mut(&mut acc), 2);
    assert_eq!(acc, [-28]);
}

#[test]
fn bool_sum_and_max_are_or_min_and_product_are_and() {
    let acc = vec![0u8, 0, 2, 255];
    let src = [0u8, 7, 0, 1];
    for op in [ReduceOp::Sum, ReduceOp::Max] {
        assert_eq!(reduce(DType::Bool, op, acc.clone(), &src), [0, 1, 1, 1]);
    }
    for op in [ReduceOp::Min, ReduceOp::Product] {
        assert_eq!(reduce(DType::Bool, op, acc.clone(), &src), [0, 0, 0, 1]);
    }
    // Validation refuses bool average; the kernels combine it as Sum.
    assert_eq!(
        reduce(DType::Bool, ReduceOp::Average, acc, &src),
        [0, 1, 1, 1]
    );
}

#[test]
fn float_min_and_max_prefer_the_number_and_order_zeros() {
    let acc = vec![f32::NAN, 1.0, f32::NAN, 0.0, -0.0];
    let src = [2.0, f32::NAN, f32::NAN, -0.0, 0.0];
    let min = reduce(DType::F32, ReduceOp::Min, acc.clone(), &src);
    let max = reduce(DType::F32, ReduceOp::Max, acc, &src);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(&bits(&min)[..2], bits(&[2.0, 1.0]));
    assert!(min[2].is_nan() && max[2].is_nan());
    assert_eq!(&bits(&min)[3..], bits(&[-0.0, -0.0]));
    assert_eq!(&bits(&max)[..2], bits(&[2.0, 1.0]));
    assert_eq!(&bits(&max)[3..], bits(&[0.0, 0.0]));
}

#[test]
fn half_floats_are_computed_in_f32_and_rounded_to_nearest_even() {
    // 1 + 2^-11 is halfway between two f16s: ties go to the even one, 1.0.
    let tie = f16::from_f32(2f32.powi(-11));
    let one = f16::from_f32(1.0);
    assert_eq!(reduce(DType::F16, ReduceOp::Sum, vec![one], &[tie]), [one]);
    // Past the tie it rounds up.
    let above = f16::from_f32(1.5 * 2f32.powi(-11));
    assert_eq!(
        reduce(DType::F16, ReduceOp::Sum, vec![one], &[above]),
        [f16::from_bits(one.to_bits() + 1)]
    );
    // Overflow to infinity: f16 tops out at 65504.
    let max = f16::MAX;
    assert_eq!(
        reduce(DType::F16, ReduceOp::Sum, vec![max], &[max]),
        [f16::INFINITY]
    );
    // bf16 has 8 bits of precision: 256 + 1 is a tie, 256 stays.
    let (b256, b1) = (bf16::from_f32(256.0), bf16::from_f32(1.0));
    assert_eq!(
        reduce(DType::BF16, ReduceOp::Sum, vec![b256], &[b1]),
        [b256]
    );
    let b258 = bf16::from_f32(258.0);
    assert_eq!(
        reduce(DType::BF16, ReduceOp::Sum, vec![b258], &[b1]),
        [bf16::from_f32(260.0)]
    );
}

#[test]
fn integer_scale_truncates_toward_zero_and_saturates() {
    let mut data = [100i8, -7, 7, -100];
    scale(DType::I8, bytemuck::cast_slice_mut(&mut data), 0.5);
    assert_eq!(data, [50, -3, 3, -50]);
    scale(DType::I8, bytemuck::cast_slice_mut(&mut data), 3.0);
    assert_eq!(data, [127, -9, 9, -128]);
    let mut data = [5u8];
    scale(DType::U8, &mut data, -1.0);
    assert_eq!(data, [0]);
}

#[test]
fn floats_scale_in_their_own_precision() {
    // Horovod multiplies f32 by the factor rounded to f32: one rounding of the product,
    // where a product in f64 rounds differently for some values.
    let factor = 0.1f64;
    let values: Vec<f32> = (1..200).map(|i| i as f32 * 0.37).collect();
    let mut data = values.clone();
    scale(DType::F32, bytemuck::cast_slice_mut(&mut data), factor);
    let in_f32: Vec<f32> = values.iter().map(|v| v * factor as f32).collect();
    assert_eq!(data, in_f32);
    let in_f64: Vec<f32> = values.iter().map(|v| (*v as f64 * factor) as f32).collect();
    assert_ne!(data, in_f64, "these values tell the two apart");
    // f16 is scaled in f32 and rounded once.
    let mut half = [f16::from_f32(3.0)];
    scale(DType::F16, bytemuck::cast_slice_mut(&mut half), factor);
    assert_eq!(half, [f16::from_f32(3.0 * factor as f32)]);
}

#[test]
fn bool_scale_normalises_and_zero_clears() {
    let mut data = [0u8, 1, 9];
    scale(DType::Bool, &mut data, 0.5);
    assert_eq!(data, [0, 1, 1]);
    scale(DType::Bool, &mut data, 0.0);
    assert_eq!(data, [0, 0, 0]);
}

#[test]
fn finish_divides_then_postscales() {
    let reduction = Reduction::new(ReduceOp::Average).with_postscale(3.0);
    let mut data = [7i32, -7];
    finish(
        DType::I32,
        reduction,
        2,
        bytemuck::cast_slice_mut(&mut data),
    );
    // 7 / 2 == 3 first, then * 3: the other order would give 10.
    assert_eq!(data, [9, -9]);
}

#[test]
fn buffers_at_any_alignment_and_partial_elements() {
    // Two f32s at an odd byte offset, with two stray bytes after them.
    let mut acc = [0u8; 11];
    let mut src = [0u8; 10];
    acc[1..9].copy_from_slice(bytemuck::cast_slice(&[1.5f32, -2.0]));
    src[..8].copy_from_slice(bytemuck::cast_slice(&[0.25f32, 4.0]));
    acc[9..].copy_from_slice(&[0xaa, 0xbb]);
    src[8..].copy_from_slice(&[0xcc, 0xdd]);
    reduce_into(DType::F32, ReduceOp::Sum, &mut acc[1..], &src);
    let sums: [f32; 2] = bytemuck::pod_read_unaligned(&acc[1..9]);
    assert_eq!(sums, [1.75, 2.0]);
    assert_eq!(acc[9..], [0xaa, 0xbb], "a partial element is left alone");
}
