//! How a reduction of one dtype runs: by NCCL alone where NCCL can express it exactly as
//! hvd defines it, through host memory where it cannot (NCCL has no 16-bit integers, and
//! scale factors other than a float sum's need a kernel hvd does not have on the device).

use hvd_core::{DType, ReduceOp, Reduction, Result};

use crate::mapping::{self, DataType, RedOp};

/// The way one tensor's reduction runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Route {
    /// NCCL's own reduction, in place.
    Native { dtype: DataType, op: RedOp },
    /// A sum of each contribution times `factor` (`ncclRedOpCreatePreMulSum`): a float
    /// sum or average with scale factors (prescale × postscale, over n for an average).
    PreMulSum { dtype: DataType, factor: f64 },
    /// Through host memory: prescale on the host (hvd-core's kernels), widen to `wire`,
    /// reduce with `op` on NCCL, narrow, finish on the host (average, postscale).
    Staged { wire: DType, op: RedOp },
}

/// The route of a `dtype` tensor reduced with `reduction` over `ranks` ranks.
pub(crate) fn route(dtype: DType, reduction: Reduction, ranks: usize) -> Result<Route> {
    let scaled = reduction.prescale != 1.0 || reduction.postscale != 1.0;
    let combining = reduction.op.combining_op();
    if matches!(dtype, DType::I16 | DType::U16) {
        // Sums and products wrap alike in 32 bits and in their low 16; order survives
        // widening: the low 16 bits of an i32 result are the 16-bit result.
        return Ok(Route::Staged {
            wire: DType::I32,
            op: mapping::red_op(combining, DType::I32)?,
        });
    }
    if !scaled {
        return Ok(Route::Native {
            dtype: mapping::data_type(dtype)?,
            op: mapping::red_op(reduction.op, dtype)?,
        });
    }
    let float = matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
    match reduction.op {
        ReduceOp::Sum | ReduceOp::Average if float => {
            let over = if reduction.op == ReduceOp::Average {
                ranks as f64
            } else {
                1.0
            };
            Ok(Route::PreMulSum {
                dtype: mapping::data_type(dtype)?,
                factor: reduction.prescale * reduction.postscale / over,
            })
        }
        _ => Ok(Route::Staged {
            wire: dtype,
            op: mapping::red_op(combining, dtype)?,
        }),
    }
}

/// `bytes` of `dtype` as `wire` elements (16-bit integers sign- or zero-extended).
pub(crate) fn widen(dtype: DType, wire: DType, bytes: &[u8]) -> Vec<u8> {
    match (dtype, wire) {
        (DType::I16, DType::I32) => bytes
            .chunks_exact(2)
            .flat_map(|c| i32::from(i16::from_ne_bytes([c[0], c[1]])).to_ne_bytes())
            .collect(),
        (DType::U16, DType::I32) => bytes
            .chunks_exact(2)
            .flat_map(|c| i32::from(u16::from_ne_bytes([c[0], c[1]])).to_ne_bytes())
            .collect(),
        _ => bytes.to_vec(),
    }
}

/// `wire` elements back as `dtype` (the low 16 bits of each, for 16-bit integers).
pub(crate) fn narrow(dtype: DType, wire: DType, bytes: &[u8]) -> Vec<u8> {
    match (dtype, wire) {
        (DType::I16 | DType::U16, DType::I32) => bytes
            .chunks_exact(4)
            .flat_map(|c| (i32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as u16).to_ne_bytes())
            .collect(),
        _ => bytes.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unscaled_reductions_are_nccls_own_and_float_scales_premultiply() {
        let sum = Reduction::new(ReduceOp::Sum);
        assert_eq!(
            route(DType::F32, sum, 4).unwrap(),
            Route::Native {
                dtype: DataType::Float32,
                op: RedOp::Sum
            }
        );
        let scaled = Reduction::new(ReduceOp::Average)
            .with_prescale(0.5)
            .with_postscale(4.0);
        assert_eq!(
            route(DType::BF16, scaled, 4).unwrap(),
            Route::PreMulSum {
                dtype: DataType::Bfloat16,
                factor: 0.5
            }
        );
    }

    #[test]
    fn what_nccl_cannot_express_goes_through_the_host() {
        let max = Reduction::new(ReduceOp::Max).with_postscale(-3.0);
        assert_eq!(
            route(DType::F32, max, 2).unwrap(),
            Route::Staged {
                wire: DType::F32,
                op: RedOp::Max
            }
        );
        let int_avg = Reduction::new(ReduceOp::Average).with_prescale(2.0);
        assert_eq!(
            route(DType::I32, int_avg, 2).unwrap(),
            Route::Staged {
                wire: DType::I32,
                op: RedOp::Sum
            }
        );
        let product = Reduction::new(ReduceOp::Product);
        assert_eq!(
            route(DType::U16, product, 2).unwrap(),
            Route::Staged {
                wire: DType::I32,
                op: RedOp::Prod
            }
        );
    }

    #[test]
    fn sixteen_bit_integers_widen_and_narrow_back_exactly() {
        let values: Vec<u8> = [-3i16, i16::MAX, i16::MIN]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let wide = widen(DType::I16, DType::I32, &values);
        assert_eq!(i32::from_ne_bytes(wide[4..8].try_into().unwrap()), 32767);
        assert_eq!(narrow(DType::I16, DType::I32, &wide), values);
        let unsigned = 65535u16.to_ne_bytes();
        let wide = widen(DType::U16, DType::I32, &unsigned);
        assert_eq!(i32::from_ne_bytes(wide[..].try_into().unwrap()), 65535);
        // 65535 * 3 wraps to 65533 in 16 bits, as the low bits of the 32-bit product.
        let product = (65535i32 * 3).to_ne_bytes();
        assert_eq!(
            narrow(DType::U16, DType::I32, &product),
            65533u16.to_ne_bytes()
        );
    }
}
