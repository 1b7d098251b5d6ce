//! Adasum's combination of two vectors, the step every level of the recursion takes.
//!
//! For vectors `a` and `b` (Maleki et al., "Scaling Distributed Training with Adaptive
//! Summation", MLSys 2021):
//!
//! ```text
//! adasum(a, b) = (1 - a·b / (2 |a|²)) a + (1 - a·b / (2 |b|²)) b
//! ```
//!
//! Orthogonal vectors add up, equal vectors average, and the result does not change when
//! both are scaled alike. A zero (or vanishing) vector keeps its partner's coefficient at
//! one. Dot products and norms accumulate in f64; f32 and f64 combine in f64, f16 and
//! bf16 in f32 with f32 coefficients, each rounded once to the tensor's type.

use half::{bf16, f16};

use crate::DType;

/// The dot product and squared norms of two vectors, or of the parts of them one rank
/// holds (partial sums add up to the whole).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Dots {
    pub ab: f64,
    pub aa: f64,
    pub bb: f64,
}

impl Dots {
    /// The coefficients of `a` and `b` in their combination.
    pub fn coefficients(self) -> (f64, f64) {
        // Below this a squared norm is taken for zero: dividing by it would overflow.
        let vanishing = f64::MIN_POSITIVE.sqrt();
        let coefficient = |norm: f64| {
            if norm >= vanishing {
                1.0 - self.ab / norm * 0.5
            } else {
                1.0
            }
        };
        (coefficient(self.aa), coefficient(self.bb))
    }
}

/// The element types Adasum combines.
trait Real: bytemuck::Pod {
    fn widen(self) -> f64;
    /// `x * own + y * other`, rounded once to `Self`.
    fn combine(x: Self, own: f64, y: Self, other: f64) -> Self;
}

impl Real for f64 {
    fn widen(self) -> f64 {
        self
    }
    fn combine(x: Self, own: f64, y: Self, other: f64) -> Self {
        x * own + y * other
    }
}

impl Real for f32 {
    fn widen(self) -> f64 {
        f64::from(self)
    }
    fn combine(x: Self, own: f64, y: Self, other: f64) -> Self {
        (f64::from(x) * own + f64::from(y) * other) as f32
    }
}

macro_rules! half_real {
    ($($t:ty),*) => {$(
        impl Real for $t {
            fn widen(self) -> f64 {
                self.to_f64()
            }
            fn combine(x: Self, own: f64, y: Self, other: f64) -> Self {
                <$t>::from_f32(x.to_f32() * own as f32 + y.to_f32() * other as f32)
            }
        }
    )*};
}
half_real!(f16, bf16);

/// A dtype Adasum combines: f16, bf16, f32 or f64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floating(DType);

impl Floating {
    /// `dtype`, if Adasum combines it.
    pub fn new(dtype: DType) -> Option<Floating> {
        matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
            .then_some(Floating(dtype))
    }

    pub fn dtype(self) -> DType {
        self.0
    }
}

fn elements<T: Real>(bytes: &[u8]) -> impl Iterator<Item = T> + '_ {
    bytes
        .chunks_exact(size_of::<T>())
        .map(bytemuck::pod_read_unaligned::<T>)
}

fn dots_typed<T: Real>(a: &[u8], b: &[u8]) -> Dots {
    let mut dots = Dots::default();
    for (x, y) in elements::<T>(a).zip(elements::<T>(b)) {
        let (x, y) = (x.widen(), y.widen());
        dots.ab += x * y;
        dots.aa += x * x;
        dots.bb += y * y;
    }
    dots
}

fn combine_typed<T: Real>(own: &mut [u8], own_coefficient: f64, other: &[u8], coefficient: f64) {
    let width = size_of::<T>();
    for (x, y) in own.chunks_exact_mut(width).zip(other.chunks_exact(width)) {
        let combined = T::combine(
            bytemuck::pod_read_unaligned(x),
            own_coefficient,
            bytemuck::pod_read_unaligned(y),
            coefficient,
        );
        x.copy_from_slice(bytemuck::bytes_of(&combined));
    }
}

macro_rules! by_dtype {
    ($kind:expr, $f:ident, $($args:expr),*) => {
        match $kind.0 {
            DType::F16 => $f::<f16>($($args),*),
            DType::BF16 => $f::<bf16>($($args),*),
            DType::F32 => $f::<f32>($($args),*),
            // `Floating` holds nothing else.
            _ => $f::<f64>($($args),*),
        }
    };
}

/// The dot product and squared norms of the vectors in `a` and `b` (bytes of equal
/// length).
pub fn dots(kind: Floating, a: &[u8], b: &[u8]) -> Dots {
    by_dtype!(kind, dots_typed, a, b)
}

/// `own = own_coefficient * own + coefficient * other`, element by element.
pub fn combine_into(
    kind: Floating,
    own: &mut [u8],
    own_coefficient: f64,
    other: &[u8],
    coefficient: f64,
) {
    by_dtype!(
        kind,
        combine_typed,
        own,
        own_coefficient,
        other,
        coefficient
    )
}

/// `a = adasum(a, b)` for two whole vectors on one rank: the reference the distributed
/// algorithm agrees with.
pub fn pair(kind: Floating, a: &mut [u8], b: &[u8]) {
    let (ca, cb) = dots(kind, a, b).coefficients();
    combine_into(kind, a, ca, b, cb);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adasum_f64(a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut out = a.to_vec();
        pair(
            Floating::new(DType::F64).unwrap(),
            bytemuck::cast_slice_mut(&mut out),
            bytemuck::cast_slice(b),
        );
        out
    }

    /// The formula written out, term by term, without the module's helpers.
    fn direct(a: &[f64], b: &[f64]) -> Vec<f64> {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let aa: f64 = a.iter().map(|x| x * x).sum();
        let bb: f64 = b.iter().map(|x| x * x).sum();
        a.iter()
            .zip(b)
            .map(|(x, y)| (1.0 - dot / (2.0 * aa)) * x + (1.0 - dot / (2.0 * bb)) * y)
            .collect()
    }

    #[test]
    fn matches_the_formula_written_out() {
        let a = [0.5, -1.25, 3.0, 2.0];
        let b = [1.0, 0.75, -2.0, 4.5];
        let got = adasum_f64(&a, &b);
        for (g, want) in got.iter().zip(direct(&a, &b)) {
            assert!((g - want).abs() < 1e-12, "{got:?}");
        }
    }

    #[test]
    fn orthogonal_vectors_add_and_equal_vectors_average() {
        assert_eq!(adasum_f64(&[2.0, 0.0], &[0.0, 3.0]), [2.0, 3.0]);
        assert_eq!(adasum_f64(&[1.5, -4.0], &[1.5, -4.0]), [1.5, -4.0]);
    }

    #[test]
    fn a_zero_vector_leaves_its_partner_unchanged() {
        assert_eq!(adasum_f64(&[0.0, 0.0], &[1.0, -2.0]), [1.0, -2.0]);
        assert_eq!(adasum_f64(&[1.0, -2.0], &[0.0, 0.0]), [1.0, -2.0]);
    }

    #[test]
    fn scaling_both_inputs_scales_the_result() {
        let (a, b) = ([1.0, 2.0, -0.5], [0.25, -1.0, 3.0]);
        let scaled: Vec<f64> = adasum_f64(&a.map(|x| x * 8.0), &b.map(|x| x * 8.0));
        for (s, r) in scaled.iter().zip(adasum_f64(&a, &b)) {
            assert!((s - 8.0 * r).abs() < 1e-12);
        }
    }

    #[test]
    fn half_precision_combines_in_f32_and_rounds_once() {
        let a: Vec<f16> = [1.0f32, 0.0].map(f16::from_f32).to_vec();
        let b: Vec<f16> = [0.0f32, 1.0].map(f16::from_f32).to_vec();
        let mut out = a.clone();
        pair(
            Floating::new(DType::F16).unwrap(),
            bytemuck::cast_slice_mut(&mut out),
            bytemuck::cast_slice(&b),
        );
        assert_eq!(out, [f16::ONE, f16::ONE]);
    }

    #[test]
    fn only_floats_are_combined() {
        let floats = DType::ALL.into_iter().filter_map(Floating::new);
        assert_eq!(
            floats.map(Floating::dtype).collect::<Vec<_>>(),
            [DType::F16, DType::BF16, DType::F32, DType::F64]
        );
    }
}
