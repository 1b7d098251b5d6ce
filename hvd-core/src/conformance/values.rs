//! Test values: small integers that every dtype holds exactly, so that sums and products
//! over up to 8 ranks are exact and results can be compared bit for bit, except after
//! division or scaling.

use half::{bf16, f16};

use crate::{DType, ReduceOp, Reduction, kernels};

/// The value rank `rank` contributes at element `index`, for a check seeded with `salt`.
///
/// For `Product` the values are 1, 2 and (signed types) -1, so a product over 8 ranks
/// stays within ±256; otherwise they lie in -5..=5 (0..=10 for unsigned types), so a sum
/// over 8 ranks stays within ±80.
pub fn value(dtype: DType, op: ReduceOp, rank: usize, index: usize, salt: usize) -> i64 {
    let mix = rank.wrapping_mul(7) + index.wrapping_mul(5) + salt.wrapping_mul(13);
    let signed = !matches!(dtype, DType::U8 | DType::U16 | DType::Bool);
    match (op, dtype) {
        (_, DType::Bool) => mix.is_multiple_of(3) as i64,
        (ReduceOp::Product, _) if signed => [1, 2, -1][mix % 3],
        (ReduceOp::Product, _) => [1, 2][mix % 2],
        _ if signed => (mix % 11) as i64 - 5,
        _ => (mix % 11) as i64,
    }
}

/// Encodes `values` as the bytes of a `dtype` tensor.
pub fn encode(dtype: DType, values: impl IntoIterator<Item = i64>) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        match dtype {
            DType::U8 => out.push(v as u8),
            DType::I8 => out.push(v as i8 as u8),
            DType::Bool => out.push((v != 0) as u8),
            DType::U16 => out.extend((v as u16).to_ne_bytes()),
            DType::I16 => out.extend((v as i16).to_ne_bytes()),
            DType::I32 => out.extend((v as i32).to_ne_bytes()),
            DType::I64 => out.extend(v.to_ne_bytes()),
            DType::F16 => out.extend(f16::from_f64(v as f64).to_ne_bytes()),
            DType::BF16 => out.extend(bf16::from_f64(v as f64).to_ne_bytes()),
            DType::F32 => out.extend((v as f32).to_ne_bytes()),
            DType::F64 => out.extend((v as f64).to_ne_bytes()),
        }
    }
    out
}

/// Element `index` of a `dtype` tensor's bytes, as `f64` (for comparison and messages).
pub fn element(dtype: DType, bytes: &[u8], index: usize) -> f64 {
    let w = dtype.size();
    let b = &bytes[index * w..(index + 1) * w];
    let arr2 = || [b[0], b[1]];
    let arr4 = || [b[0], b[1], b[2], b[3]];
    let arr8 = || [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
    match dtype {
        DType::U8 | DType::Bool => b[0] as f64,
        DType::I8 => b[0] as i8 as f64,
        DType::U16 => u16::from_ne_bytes(arr2()) as f64,
        DType::I16 => i16::from_ne_bytes(arr2()) as f64,
        DType::I32 => i32::from_ne_bytes(arr4()) as f64,
        DType::I64 => i64::from_ne_bytes(arr8()) as f64,
        DType::F16 => f16::from_ne_bytes(arr2()).to_f64(),
        DType::BF16 => bf16::from_ne_bytes(arr2()).to_f64(),
        DType::F32 => f32::from_ne_bytes(arr4()) as f64,
        DType::F64 => f64::from_ne_bytes(arr8()),
    }
}

/// Relative tolerance for results that went through a division or a scale factor (one
/// rounding in the dtype, plus transports that multiply by 1/n instead of dividing).
/// Integer results must match exactly.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        DType::F32 => 1e-6,
        DType::F64 => 1e-12,
        _ => 0.0,
    }
}

/// Whether `actual` is close enough to `expected` for `dtype`.
pub fn close(dtype: DType, expected: f64, actual: f64) -> bool {
    if expected == actual {
        return true;
    }
    let tol = tolerance(dtype);
    tol > 0.0 && (expected - actual).abs() <= tol * expected.abs().max(1.0)
}

/// The values repeat with this period in the element index (lcm of the moduli in
/// [`value`]), which lets large tensors be built and checked by copying one period.
pub const PERIOD: usize = 66;

/// Repeats `block` (whole elements of `width` bytes) until it is `len` elements long.
pub fn repeat(block: Vec<u8>, width: usize, len: usize) -> Vec<u8> {
    let total = len * width;
    let mut out = block;
    out.truncate(total);
    while out.len() < total {
        let take = out.len().min(total - out.len());
        out.extend_from_within(..take);
    }
    out
}

/// What `rank` contributes to a check: `len` elements of `dtype`.
pub fn contribution(dtype: DType, op: ReduceOp, rank: usize, len: usize, salt: usize) -> Vec<u8> {
    let block = encode(
        dtype,
        (0..len.min(PERIOD)).map(|i| value(dtype, op, rank, i, salt)),
    );
    repeat(block, dtype.size(), len)
}

/// The result of reducing every rank's contribution with `reduction`, per the kernels'
/// semantics: prescale each contribution, combine in rank order, finish.
pub fn reduced(
    dtype: DType,
    reduction: Reduction,
    size: usize,
    len: usize,
    salt: usize,
) -> Vec<u8> {
    let block_len = len.min(PERIOD);
    let mut acc = Vec::new();
    for rank in 0..size {
        let mut c = contribution(dtype, reduction.op, rank, block_len, salt);
        kernels::prescale(dtype, reduction, &mut c);
        if rank == 0 {
            acc = c;
        } else {
            kernels::reduce_into(dtype, reduction.op, &mut acc, &c);
        }
    }
    kernels::finish(dtype, reduction, size, &mut acc);
    repeat(acc, dtype.size(), len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_exactly_in_every_dtype() {
        for dtype in DType::ALL {
            for op in ReduceOp::ALL {
                let vals: Vec<i64> = (0..50).map(|i| value(dtype, op, 3, i, 1)).collect();
                let bytes = encode(dtype, vals.iter().copied());
                for (i, v) in vals.iter().enumerate() {
                    assert_eq!(element(dtype, &bytes, i), *v as f64, "{dtype} {op}");
                }
            }
        }
    }
}
