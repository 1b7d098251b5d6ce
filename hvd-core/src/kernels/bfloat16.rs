//! bf16, computed in f32 with branch-free conversions that the compiler vectorises.
//!
//! `half`'s own conversions branch per element (NaN check, rounding), which keeps loops
//! scalar. These compute both outcomes and select, and match `half` bit for bit.

use half::bf16;

use super::fast::Kernels;
use super::lanes;
use crate::ReduceOp;

/// The f32 of a bf16: the bits move to the top half; a NaN gets its quiet bit set, as
/// `bf16::to_f32` does.
#[inline(always)]
pub(super) fn to_f32(x: bf16) -> f32 {
    let wide = f32::from_bits(u32::from(x.to_bits()) << 16);
    if wide.is_nan() {
        f32::from_bits(wide.to_bits() | 0x0040_0000)
    } else {
        wide
    }
}

/// The bf16 nearest to an f32, ties to even; a NaN keeps its top mantissa bits and gets
/// its quiet bit set, as `bf16::from_f32` does.
#[inline(always)]
pub(super) fn from_f32(x: f32) -> bf16 {
    let bits = x.to_bits();
    // Adding 0x7fff plus the lowest kept bit carries into the kept bits exactly when the
    // dropped half is above the midpoint, or at it with an odd kept part. Only NaNs can
    // carry out of the top bit, and they are replaced below.
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
    let quiet_nan = (bits >> 16) | 0x0040;
    bf16::from_bits(if x.is_nan() { quiet_nan } else { rounded } as u16)
}

impl Kernels for bf16 {
    /// Computed in f32, element by element: converting, combining and rounding in one
    /// loop keeps everything in registers.
    #[inline(always)]
    fn reduce(op: ReduceOp, acc: &mut [bf16], src: &[bf16]) {
        lanes::reduce_via(op, acc, src, to_f32, from_f32);
    }

    /// Multiplied in f32 by the factor rounded to f32, then rounded to bf16: every step
    /// is correctly rounded in software, so every CPU gets the same bits (see
    /// `scalar.rs`).
    #[inline(always)]
    fn scale(data: &mut [bf16], factor: f64) {
        let factor = factor as f32;
        for x in data {
            *x = from_f32(to_f32(*x) * factor);
        }
    }

    #[inline(always)]
    fn divide(data: &mut [bf16], ranks: usize) {
        let d = ranks as f32;
        for x in data {
            *x = from_f32(to_f32(*x) / d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn from_f32_matches_half_around_every_bf16() {
        // Every kept top half, with the dropped bits at each rounding boundary: exact,
        // just above exact, just below the tie, the tie, just above it, the maximum. This
        // covers ties to even and odd, overflow to infinity, subnormals and every NaN class.
        for top in 0..=0xffff_u32 {
            for low in [0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff] {
                let x = f32::from_bits(top << 16 | low);
                assert_eq!(
                    from_f32(x).to_bits(),
                    bf16::from_f32(x).to_bits(),
                    "{:#010x}",
                    x.to_bits()
                );
            }
        }
    }

    #[test]
    fn to_f32_matches_half_on_every_bf16() {
        for bits in 0..=u16::MAX {
            let x = bf16::from_bits(bits);
            assert_eq!(to_f32(x).to_bits(), x.to_f32().to_bits(), "{bits:#06x}");
        }
    }

    proptest! {
        #[test]
        fn from_f32_matches_half(bits in any::<u32>()) {
            let x = f32::from_bits(bits);
            prop_assert_eq!(from_f32(x).to_bits(), bf16::from_f32(x).to_bits());
        }
    }
}
