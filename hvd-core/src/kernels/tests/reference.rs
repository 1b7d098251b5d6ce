//! Property tests: the fast kernels, built for every instruction set this CPU runs, give
//! the reference's bytes for every dtype and op, at every alignment and length.
//!
//! Floats compare bit patterns. The one allowance: when both operands of an element are
//! NaN, the result must be NaN but its payload may differ. IEEE 754 leaves unspecified
//! which operand's payload propagates, x86 takes the first operand's, and the compiler
//! may swap the operands of a commutative op differently in a vector loop than in a scalar
//! one.

use half::{bf16, f16};
use proptest::prelude::*;

use super::super::cpu::Isa;
use super::super::{binary16, scalar};
use crate::{DType, ReduceOp};

/// Elements per buffer: beyond one stack chunk (256) so chunk boundaries are crossed.
const MAX_LEN: usize = 600;

/// One element's bytes: random bits, a dtype edge value, or a small ordinary number, so
/// that sums and products land on rounding ties and on overflow.
fn element(dtype: DType) -> impl Strategy<Value = Vec<u8>> {
    (0..3u8, any::<u64>()).prop_map(move |(kind, raw)| {
        let bits = match kind {
            0 => raw,
            1 => {
                let edges = edges(dtype);
                edges[raw as usize % edges.len()]
            }
            _ => small(dtype, raw),
        };
        bits.to_le_bytes()[..dtype.size()].to_vec()
    })
}

/// Bit patterns at the edges of a dtype: zeros, extremes, infinities, subnormals, quiet
/// and signalling NaNs with and without payloads.
fn edges(dtype: DType) -> Vec<u64> {
    match dtype {
        DType::F16 => vec![
            0x0000, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7d23, 0x0001,
            0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c01,
        ],
        DType::BF16 => vec![
            0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fa3, 0x0001,
            0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3f81,
        ],
        DType::F32 => [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            f32::EPSILON,
        ]
        .map(|x| u64::from(x.to_bits()))
        .into_iter()
        .chain([
            0x7fc0_0000,
            0xffc0_0000,
            0x7f80_0001,
            0x7fa1_2345,
            0x0000_0001,
        ])
        .collect(),
        DType::F64 => [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
        ]
        .map(f64::to_bits)
        .into_iter()
        .chain([
            0x7ff8_0000_0000_0000,
            0xfff8_0000_0000_0000,
            0x7ff0_0000_0000_0001,
            0x7ff4_5678_9abc_def0,
            0x0000_0000_0000_0001,
        ])
        .collect(),
        DType::Bool => vec![0, 1, 2, 0xff],
        _ => {
            let bits = 8 * dtype.size() as u32;
            let sign = 1u64 << (bits - 1);
            // 0, 1, -1 (or the unsigned maximum), the signed minimum and maximum, 2.
            vec![0, 1, u64::MAX, sign, sign - 1, 2]
        }
    }
}

/// A small ordinary number of the dtype, so results stay finite and exercise rounding.
fn small(dtype: DType, raw: u64) -> u64 {
    let int = (raw % 15) as i64 - 7;
    let float = (raw % 4001) as f64 / 16.0 - 125.0;
    match dtype {
        DType::F16 => u64::from(f16::from_f64(float).to_bits()),
        DType::BF16 => u64::from(bf16::from_f64(float).to_bits()),
        DType::F32 => u64::from((float as f32).to_bits()),
        DType::F64 => float.to_bits(),
        _ => int as u64,
    }
}

/// A buffer of `len` elements plus `extra` trailing bytes (less than an element, which
/// every kernel must leave alone), starting `offset` bytes into 8-aligned memory.
#[derive(Debug, Clone)]
struct Buffer {
    storage: Vec<u64>,
    offset: usize,
    len: usize,
}

impl Buffer {
    fn new(elements: &[Vec<u8>], extra: &[u8], offset: usize) -> Self {
        let len = elements.iter().map(Vec::len).sum::<usize>() + extra.len();
        let mut buffer = Buffer {
            storage: vec![0; (offset + len).div_ceil(8)],
            offset,
            len,
        };
        let bytes = elements.iter().flatten().chain(extra);
        for (b, x) in buffer.bytes_mut().iter_mut().zip(bytes) {
            *b = *x;
        }
        buffer
    }

    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.storage)[self.offset..self.offset + self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let range = self.offset..self.offset + self.len;
        &mut bytemuck::cast_slice_mut(&mut self.storage)[range]
    }
}

/// A buffer of a short length (0 to 3 elements) or any up to `MAX_LEN`, at any offset.
fn buffer(dtype: DType) -> impl Strategy<Value = Buffer> {
    prop_oneof![0..4usize, 0..MAX_LEN]
        .prop_flat_map(move |len| {
            (
                prop::collection::vec(element(dtype), len),
                prop::collection::vec(any::<u8>(), 0..dtype.size()),
                0..8usize,
            )
        })
        .prop_map(|(elements, extra, offset)| Buffer::new(&elements, &extra, offset))
}

fn dtype_and_op() -> impl Strategy<Value = (DType, ReduceOp)> {
    (
        prop::sample::select(&DType::ALL[..]),
        prop::sample::select(&ReduceOp::ALL[..]),
    )
}

fn is_nan(dtype: DType, bytes: &[u8]) -> bool {
    match dtype {
        DType::F16 => bytemuck::pod_read_unaligned::<f16>(bytes).is_nan(),
        DType::BF16 => bytemuck::pod_read_unaligned::<bf16>(bytes).is_nan(),
        DType::F32 => bytemuck::pod_read_unaligned::<f32>(bytes).is_nan(),
        DType::F64 => bytemuck::pod_read_unaligned::<f64>(bytes).is_nan(),
        _ => false,
    }
}

/// Checks `actual` against the reference's `expected`, element by element; a NaN may
/// differ in payload where `both_nan(i)` says both operands of element `i` were NaN.
fn check(
    dtype: DType,
    actual: &[u8],
    expected: &[u8],
    both_nan: impl Fn(usize) -> bool,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(actual.len(), expected.len());
    let width = dtype.size();
    for (i, (a, e)) in actual.chunks(width).zip(expected.chunks(width)).enumerate() {
        if a != e && !(both_nan(i) && is_nan(dtype, a) && is_nan(dtype, e)) {
            return Err(TestCaseError::fail(format!(
                "{dtype} element {i}: got {a:02x?}, expected {e:02x?}"
            )));
        }
    }
    Ok(())
}

fn factor() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![
            0.0,
            -0.0,
            1.0,
            0.5,
            2.0,
            -3.0,
            1.0 / 3.0,
            1e-3,
            1e300,
            1e-300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ]),
        -1e6..1e6f64,
        any::<f64>(),
    ]
}

fn ranks() -> impl Strategy<Value = usize> {
    prop_oneof![
        1..=1024usize,
        // Where f64 stops being exact, and around i64::MAX (clamped on 32-bit targets).
        prop::sample::select(
            [(1 << 53) + 1, i64::MAX as u64, 1 << 63, u64::MAX]
                .map(|r| usize::try_from(r).unwrap_or(usize::MAX))
                .to_vec()
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8192))]

    #[test]
    fn reduce_into_matches_reference(
        (dtype, op, acc, src) in dtype_and_op().prop_flat_map(|(dtype, op)| {
            (Just(dtype), Just(op), buffer(dtype), buffer(dtype))
        })
    ) {
        let mut expected = acc.clone();
        scalar::reduce_into(dtype, op, expected.bytes_mut(), src.bytes());
        let width = dtype.size();
        let both_nan = |i: usize| {
            let at = |b: &Buffer| is_nan(dtype, &b.bytes()[i * width..(i + 1) * width]);
            at(&acc) && at(&src)
        };
        for isa in Isa::supported() {
            let mut actual = acc.clone();
            isa.reduce_into(dtype, op, actual.bytes_mut(), src.bytes());
            check(dtype, actual.bytes(), expected.bytes(), both_nan)
                .map_err(|e| TestCaseError::fail(format!("{isa:?} {op}: {e}")))?;
        }
    }

    #[test]
    fn scale_matches_reference(
        (dtype, data) in prop::sample::select(&DType::ALL[..])
            .prop_flat_map(|dtype| (Just(dtype), buffer(dtype))),
        factor in factor(),
    ) {
        let mut expected = data.clone();
        scalar::scale(dtype, expected.bytes_mut(), factor);
        let both_nan = |i: usize| {
            let width = dtype.size();
            factor.is_nan() && is_nan(dtype, &data.bytes()[i * width..(i + 1) * width])
        };
        for isa in Isa::supported() {
            let mut actual = data.clone();
            isa.scale(dtype, actual.bytes_mut(), factor);
            check(dtype, actual.bytes(), expected.bytes(), both_nan)
                .map_err(|e| TestCaseError::fail(format!("{isa:?} x{factor}: {e}")))?;
        }
    }

    #[test]
    fn divide_matches_reference(
        (dtype, data) in prop::sample::select(&DType::ALL[..])
            .prop_flat_map(|dtype| (Just(dtype), buffer(dtype))),
        ranks in ranks(),
    ) {
        let mut expected = data.clone();
        scalar::divide(dtype, expected.bytes_mut(), ranks);
        for isa in Isa::supported() {
            let mut actual = data.clone();
            isa.divide(dtype, actual.bytes_mut(), ranks);
            check(dtype, actual.bytes(), expected.bytes(), |_| false)
                .map_err(|e| TestCaseError::fail(format!("{isa:?} /{ranks}: {e}")))?;
        }
    }

    /// The f16 reduction of CPUs without F16C, which the kernels above do not reach here.
    #[test]
    fn f16_without_f16c_matches_reference(
        op in prop::sample::select(&ReduceOp::ALL[..]),
        (acc, src) in (0..MAX_LEN).prop_flat_map(|len| {
            let elements = || prop::collection::vec(element(DType::F16), len);
            (elements(), elements())
        }),
    ) {
        let (acc, src) = (Buffer::new(&acc, &[], 0), Buffer::new(&src, &[], 0));
        let mut expected = acc.clone();
        scalar::reduce_into(DType::F16, op, expected.bytes_mut(), src.bytes());
        let mut actual = acc.clone();
        binary16::reduce_chunked(
            op,
            bytemuck::cast_slice_mut(actual.bytes_mut()),
            bytemuck::cast_slice(src.bytes()),
        );
        let width = DType::F16.size();
        let both_nan = |i: usize| {
            let at = |b: &Buffer| is_nan(DType::F16, &b.bytes()[i * width..(i + 1) * width]);
            at(&acc) && at(&src)
        };
        check(DType::F16, actual.bytes(), expected.bytes(), both_nan)?;
    }
}
