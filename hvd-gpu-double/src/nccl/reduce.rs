//! NCCL's datatypes and reductions, written here from NCCL's documented semantics and
//! independently of hvd-core's kernels, so that the two check each other.
//!
//! Integers wrap. Float min and max ignore a NaN against a number (as CUDA's `fminf`).
//! Half and bfloat16 are computed in f32 and rounded to nearest, ties to even.
//! `ncclAvg` multiplies each contribution by 1/n for floats and divides the integer sum
//! by n (truncating), as NCCL does; `PreMulSum` multiplies each rank's contribution by
//! that rank's scalar before summing.

/// `ncclDataType_t`, without the fp8 types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
    Bf16,
}

impl Dtype {
    pub(crate) fn from_nccl(code: i32) -> Option<Dtype> {
        Some(match code {
            0 => Dtype::I8,
            1 => Dtype::U8,
            2 => Dtype::I32,
            3 => Dtype::U32,
            4 => Dtype::I64,
            5 => Dtype::U64,
            6 => Dtype::F16,
            7 => Dtype::F32,
            8 => Dtype::F64,
            9 => Dtype::Bf16,
            _ => return None,
        })
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Dtype::I8 => 0,
            Dtype::U8 => 1,
            Dtype::I32 => 2,
            Dtype::U32 => 3,
            Dtype::I64 => 4,
            Dtype::U64 => 5,
            Dtype::F16 => 6,
            Dtype::F32 => 7,
            Dtype::F64 => 8,
            Dtype::Bf16 => 9,
        }
    }

    pub(crate) fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Dtype::I8 => "int8",
            Dtype::U8 => "uint8",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
            Dtype::I64 => "int64",
            Dtype::U64 => "uint64",
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
            Dtype::Bf16 => "bfloat16",
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::F32 | Dtype::F64 | Dtype::Bf16)
    }
}

/// A reduction; a pre-multiplied sum carries its scalar as bytes of the datatype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
    PreMulSum([u8; 8]),
}

impl RedOp {
    pub(crate) fn builtin(code: i32) -> Option<RedOp> {
        Some(match code {
            0 => RedOp::Sum,
            1 => RedOp::Prod,
            2 => RedOp::Max,
            3 => RedOp::Min,
            4 => RedOp::Avg,
            _ => return None,
        })
    }

    /// The code ranks compare (every pre-multiplied sum alike: the scalar is local).
    pub(crate) fn code(self) -> u8 {
        match self {
            RedOp::Sum => 0,
            RedOp::Prod => 1,
            RedOp::Max => 2,
            RedOp::Min => 3,
            RedOp::Avg => 4,
            RedOp::PreMulSum(_) => 5,
        }
    }

    pub(crate) fn name(code: u8) -> &'static str {
        ["sum", "prod", "max", "min", "avg", "premulsum"]
            .get(code as usize)
            .copied()
            .unwrap_or("?")
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let negative = h & 0x8000 != 0;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let magnitude = match exponent {
        0 => mantissa as f32 * f32::from_bits(0x3380_0000), // mantissa * 2^-24
        0x1f => f32::from_bits(0x7f80_0000 | (mantissa << 13)),
        _ => f32::from_bits(((exponent + 112) << 23) | (mantissa << 13)),
    };
    if negative { -magnitude } else { magnitude }
}

/// Drops the low `shift` bits of `value`, rounding to nearest, ties to even.
fn round_shift(value: u32, shift: u32) -> u32 {
    if shift == 0 {
        return value;
    }
    if shift > 31 {
        return 0;
    }
    let kept = value >> shift;
    let rest = value & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rest > half || (rest == half && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}

fn f32_to_f16(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;
    if exponent == 0xff {
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    let half_exponent = exponent - 127 + 15;
    if half_exponent >= 0x1f {
        return sign | 0x7c00;
    }
    if half_exponent <= 0 {
        // A subnormal half: the significand (with its implicit bit) shifted into place.
        let significand = mantissa | 0x80_0000;
        let shift = (14 - half_exponent) as u32;
        return sign | round_shift(significand, shift) as u16;
    }
    // A carry out of the mantissa bumps the exponent, up to infinity: both correct.
    let rounded = round_shift(mantissa, 13) + ((half_exponent as u32) << 10);
    sign | rounded as u16
}

fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

fn f32_to_bf16(value: f32) -> u16 {
    if value.is_nan() {
        return ((value.to_bits() >> 16) as u16) | 0x40;
    }
    let bits = value.to_bits();
    (bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

/// Element `i` of `bytes` as f64 (floats) or its raw integer bits (integers).
fn load_float(dtype: Dtype, bytes: &[u8]) -> f64 {
    match dtype {
        Dtype::F16 => f64::from(f16_to_f32(u16::from_ne_bytes([bytes[0], bytes[1]]))),
        Dtype::Bf16 => f64::from(bf16_to_f32(u16::from_ne_bytes([bytes[0], bytes[1]]))),
        Dtype::F32 => f64::from(f32::from_ne_bytes(
            bytes[..4].try_into().unwrap_or_default(),
        )),
        Dtype::F64 => f64::from_ne_bytes(bytes[..8].try_into().unwrap_or_default()),
        _ => 0.0,
    }
}

/// Stores `value`, rounded once into the datatype (f32 first for the 16-bit ones).
fn store_float(dtype: Dtype, value: f64, out: &mut [u8]) {
    match dtype {
        Dtype::F16 => out.copy_from_slice(&f32_to_f16(value as f32).to_ne_bytes()),
        Dtype::Bf16 => out.copy_from_slice(&f32_to_bf16(value as f32).to_ne_bytes()),
        Dtype::F32 => out.copy_from_slice(&(value as f32).to_ne_bytes()),
        Dtype::F64 => out.copy_from_slice(&value.to_ne_bytes()),
        _ => {}
    }
}

/// An integer element as i128 (wide enough for every integer type, signed or not).
fn load_int(dtype: Dtype, b: &[u8]) -> i128 {
    match dtype {
        Dtype::I8 => i128::from(b[0] as i8),
        Dtype::U8 => i128::from(b[0]),
        Dtype::I32 => i128::from(i32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        Dtype::U32 => i128::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        Dtype::I64 => i128::from(i64::from_ne_bytes(b[..8].try_into().unwrap_or_default())),
        Dtype::U64 => i128::from(u64::from_ne_bytes(b[..8].try_into().unwrap_or_default())),
        _ => 0,
    }
}

/// Stores an integer, wrapped into the datatype.
fn store_int(dtype: Dtype, value: i128, out: &mut [u8]) {
    let bytes = (value as u64).to_ne_bytes();
    let width = dtype.size();
    // Native-endian truncation: the low `width` bytes on a little-endian machine.
    if cfg!(target_endian = "little") {
        out.copy_from_slice(&bytes[..width]);
    } else {
        out.copy_from_slice(&bytes[8 - width..]);
    }
}

/// Writes this rank's contribution to `out`: `src` as it is, or pre-multiplied (by the
/// scalar of a `PreMulSum`, by 1/n for a float `Avg`).
pub(crate) fn contribute(dtype: Dtype, op: RedOp, ranks: usize, src: &[u8], out: &mut [u8]) {
    let width = dtype.size();
    let factor = match op {
        RedOp::PreMulSum(scalar) => Some(scalar),
        RedOp::Avg if dtype.is_float() => None,
        _ => {
            out.copy_from_slice(src);
            return;
        }
    };
    for (from, to) in src.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        match (factor, dtype.is_float()) {
            (Some(scalar), true) => {
                let s = load_float(dtype, &scalar);
                store_float(dtype, load_float(dtype, from) * s, to);
            }
            (Some(scalar), false) => {
                let s = load_int(dtype, &scalar);
                store_int(dtype, load_int(dtype, from).wrapping_mul(s), to);
            }
            (None, _) => store_float(dtype, load_float(dtype, from) / ranks as f64, to),
        }
    }
}

/// Combines `other` into `acc`, element by element.
pub(crate) fn combine(dtype: Dtype, op: RedOp, acc: &mut [u8], other: &[u8]) {
    let width = dtype.size();
    for (a, b) in acc.chunks_exact_mut(width).zip(other.chunks_exact(width)) {
        if dtype.is_float() {
            let (x, y) = (load_float(dtype, a), load_float(dtype, b));
            let value = match op {
                RedOp::Prod => x * y,
                RedOp::Max => x.max(y),
                RedOp::Min => x.min(y),
                RedOp::Sum | RedOp::Avg | RedOp::PreMulSum(_) => x + y,
            };
            store_float(dtype, value, a);
        } else {
            let (x, y) = (load_int(dtype, a), load_int(dtype, b));
            let value = match op {
                RedOp::Prod => x.wrapping_mul(y),
                RedOp::Max => x.max(y),
                RedOp::Min => x.min(y),
                RedOp::Sum | RedOp::Avg | RedOp::PreMulSum(_) => x + y,
            };
            store_int(dtype, value, a);
        }
    }
}

/// What remains after combining: an integer `Avg` divides by the rank count.
pub(crate) fn finish(dtype: Dtype, op: RedOp, ranks: usize, acc: &mut [u8]) {
    if op != RedOp::Avg || dtype.is_float() {
        return;
    }
    let width = dtype.size();
    for a in acc.chunks_exact_mut(width) {
        // The wrapped sum, read back in the datatype, divided toward zero.
        let value = load_int(dtype, a) / ranks as i128;
        store_int(dtype, value, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16(bits: u16) -> f32 {
        f16_to_f32(bits)
    }

    #[test]
    fn half_conversions_round_to_nearest_even_and_keep_subnormals() {
        for bits in [
            0x0000u16, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x7c00,
        ] {
            assert_eq!(f32_to_f16(f16(bits)), bits, "{bits:#06x}");
        }
        assert_eq!(f16(0x3c00), 1.0);
        assert_eq!(f16(0x0001), 2f32.powi(-24));
        // 1 + 2^-11 lies halfway between 1 and the next half; ties go to even (1.0).
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65520.0), 0x7c00, "rounds up to infinity");
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)), 0x3f80, "ties to even");
        assert_eq!(bf16_to_f32(f32_to_bf16(-3.0)), -3.0);
    }

    #[test]
    fn integers_wrap_and_average_truncates_toward_zero() {
        let mut acc = [250u8, 7];
        combine(Dtype::U8, RedOp::Sum, &mut acc, &[10, 1]);
        assert_eq!(acc, [4, 8]);
        let mut avg = (-7i32).to_ne_bytes();
        finish(Dtype::I32, RedOp::Avg, 2, &mut avg);
        assert_eq!(i32::from_ne_bytes(avg), -3);
    }

    #[test]
    fn premultiplied_sums_scale_each_contribution_by_its_rank_scalar() {
        let mut scalar = [0u8; 8];
        scalar[..4].copy_from_slice(&0.5f32.to_ne_bytes());
        let mut out = [0u8; 4];
        contribute(
            Dtype::F32,
            RedOp::PreMulSum(scalar),
            2,
            &3.0f32.to_ne_bytes(),
            &mut out,
        );
        assert_eq!(f32::from_ne_bytes(out), 1.5);
        contribute(Dtype::F32, RedOp::Avg, 4, &2.0f32.to_ne_bytes(), &mut out);
        assert_eq!(f32::from_ne_bytes(out), 0.5);
    }
}
