//! Casts between float tensors and their 16-bit wire form, for gradient compression:
//! f32 and f64 narrowed to f16 or bf16 (round to nearest, ties to even), and widened back
//! exactly.
//!
//! Buffers arrive at any alignment, so elements go through aligned stack chunks (a copy
//! through L1; the cast itself stays a vectorised loop).

use bytemuck::Pod;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::bfloat16;
use crate::DType;

/// Elements per stack chunk: small enough for L1, big enough to amortise the loop setup.
const CHUNK: usize = 256;

/// Converts the whole elements of `src` (type `S`) into `dst` (type `D`), chunk by chunk.
fn chunked<S: Pod, D: Pod>(src: &[u8], dst: &mut [u8], convert: impl Fn(&[S], &mut [D])) {
    let mut s = [S::zeroed(); CHUNK];
    let mut d = [D::zeroed(); CHUNK];
    let (src_step, dst_step) = (CHUNK * size_of::<S>(), CHUNK * size_of::<D>());
    for (src, dst) in src.chunks(src_step).zip(dst.chunks_mut(dst_step)) {
        let n = (src.len() / size_of::<S>()).min(dst.len() / size_of::<D>());
        let (s, d) = (&mut s[..n], &mut d[..n]);
        bytemuck::cast_slice_mut(s).copy_from_slice(&src[..n * size_of::<S>()]);
        convert(s, d);
        dst[..n * size_of::<D>()].copy_from_slice(bytemuck::cast_slice(d));
    }
}

fn elementwise<S: Copy, D>(f: impl Fn(S) -> D) -> impl Fn(&[S], &mut [D]) {
    move |s, d| d.iter_mut().zip(s).for_each(|(d, s)| *d = f(*s))
}

/// Whether [`narrow`] and [`widen`] convert between `wide` and `wire`.
pub fn is_supported(wide: DType, wire: DType) -> bool {
    matches!(wide, DType::F32 | DType::F64) && matches!(wire, DType::F16 | DType::BF16)
}

/// Writes `src`, elements of `wide` (f32 or f64), into `dst` as elements of `wire` (f16
/// or bf16), each rounded to the nearest, ties to even; values beyond the wire type's
/// range become infinities. Converts as many elements as both buffers hold; other pairs
/// of dtypes (see [`is_supported`]) convert nothing.
pub fn narrow(wide: DType, src: &[u8], wire: DType, dst: &mut [u8]) {
    match (wide, wire) {
        (DType::F32, DType::F16) => chunked(src, dst, |s: &[f32], d: &mut [f16]| {
            d.convert_from_f32_slice(s)
        }),
        (DType::F32, DType::BF16) => chunked(src, dst, elementwise(bfloat16::from_f32)),
        (DType::F64, DType::F16) => chunked(src, dst, elementwise(f16::from_f64)),
        (DType::F64, DType::BF16) => chunked(src, dst, elementwise(bf16::from_f64)),
        _ => {}
    }
}

/// Writes `src`, elements of `wire` (f16 or bf16), into `dst` as elements of `wide` (f32
/// or f64): exact, every 16-bit float is an f32. The inverse of [`narrow`].
pub fn widen(wire: DType, src: &[u8], wide: DType, dst: &mut [u8]) {
    match (wire, wide) {
        (DType::F16, DType::F32) => chunked(src, dst, |s: &[f16], d: &mut [f32]| {
            s.convert_to_f32_slice(d)
        }),
        (DType::BF16, DType::F32) => chunked(src, dst, elementwise(bfloat16::to_f32)),
        (DType::F16, DType::F64) => chunked(src, dst, elementwise(f16::to_f64)),
        (DType::BF16, DType::F64) => chunked(src, dst, elementwise(bf16::to_f64)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Pod>(v: &[T]) -> Vec<u8> {
        bytemuck::cast_slice(v).to_vec()
    }

    /// The elements of a byte buffer of any alignment.
    fn values<T: Pod>(bytes: &[u8]) -> Vec<T> {
        bytes
            .chunks_exact(size_of::<T>())
            .map(bytemuck::pod_read_unaligned)
            .collect()
    }

    /// Values that exercise rounding, overflow, subnormals, signed zero and NaN.
    fn samples() -> Vec<f32> {
        let mut v = vec![
            0.0, -0.0, 1.0, -2.5, 1.0e-3, 3.0e-8, 65504.0, 70000.0, 3.0e38,
        ];
        v.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            f32::MAX,
        ]);
        v.extend((0..1000).map(|i| (i as f32 * 0.7919).sin() * 10f32.powi(i % 9 - 4)));
        v
    }

    #[test]
    fn narrowing_f32_matches_half_element_by_element() {
        let x = samples();
        for (wire, reference) in [
            (
                DType::F16,
                (|v: f32| f16::from_f32(v).to_bits()) as fn(f32) -> u16,
            ),
            (DType::BF16, |v: f32| bf16::from_f32(v).to_bits()),
        ] {
            let mut out = vec![0u8; x.len() * 2];
            narrow(DType::F32, &bytes(&x), wire, &mut out);
            let got: Vec<u16> = values(&out);
            let want: Vec<u16> = x.iter().map(|v| reference(*v)).collect();
            assert_eq!(got, want, "{wire}");
        }
        let mut out = [0u8; 2];
        narrow(DType::F32, &bytes(&[f32::NAN]), DType::BF16, &mut out);
        assert!(bf16::from_bits(u16::from_ne_bytes(out)).is_nan());
    }

    #[test]
    fn widening_is_exact_and_inverts_narrowing() {
        for wire in [DType::F16, DType::BF16] {
            // Every 16-bit pattern that is not a NaN widens to a value that narrows back
            // to the same bits.
            let all: Vec<u16> = (0..=u16::MAX).collect();
            let mut wide = vec![0u8; all.len() * 4];
            widen(wire, &bytes(&all), DType::F32, &mut wide);
            let mut back = vec![0u8; all.len() * 2];
            narrow(DType::F32, &wide, wire, &mut back);
            let back: Vec<u16> = values(&back);
            let wide: Vec<f32> = values(&wide);
            for ((bits, w), b) in all.iter().zip(&wide).zip(&back) {
                if !w.is_nan() {
                    assert_eq!(bits, b, "{wire} {bits:#06x} -> {w}");
                }
            }
        }
    }

    #[test]
    fn f64_goes_straight_to_the_wire_type() {
        let x: Vec<f64> = samples()
            .into_iter()
            .map(f64::from)
            .chain([1.0 + 1e-12])
            .collect();
        let mut wire = vec![0u8; x.len() * 2];
        narrow(DType::F64, &bytes(&x), DType::F16, &mut wire);
        let mut back = vec![0u8; x.len() * 8];
        widen(DType::F16, &wire, DType::F64, &mut back);
        let back: Vec<f64> = values(&back);
        for (x, y) in x.iter().zip(&back) {
            assert_eq!(f16::from_f64(*x).to_f64().to_bits(), y.to_bits(), "{x}");
        }
    }

    #[test]
    fn misaligned_buffers_convert_the_same() {
        let x = samples();
        let mut src = vec![0u8; x.len() * 4 + 1];
        src[1..].copy_from_slice(&bytes(&x));
        let mut aligned = vec![0u8; x.len() * 2];
        narrow(DType::F32, &bytes(&x), DType::BF16, &mut aligned);
        let mut odd = vec![0u8; x.len() * 2 + 1];
        narrow(DType::F32, &src[1..], DType::BF16, &mut odd[1..]);
        assert_eq!(aligned, odd[1..]);
        let mut wide = vec![0u8; x.len() * 4 + 3];
        widen(DType::BF16, &odd[1..], DType::F32, &mut wide[3..]);
        let mut want = vec![0u8; x.len() * 4];
        widen(DType::BF16, &aligned, DType::F32, &mut want);
        assert_eq!(want, wide[3..]);
    }

    #[test]
    fn only_float_to_sixteen_bit_pairs_convert() {
        assert!(is_supported(DType::F32, DType::BF16));
        assert!(!is_supported(DType::F16, DType::BF16));
        assert!(!is_supported(DType::I32, DType::F16));
        let mut dst = [7u8; 4];
        narrow(DType::I32, &[1, 0, 0, 0], DType::F16, &mut dst);
        assert_eq!(dst, [7; 4]);
    }
}
