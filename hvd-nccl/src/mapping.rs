//! hvd's dtypes and reductions as NCCL's (`ncclDataType_t`, `ncclRedOp_t`).
//!
//! Every dtype NCCL has maps directly, bf16 included. Bool travels as u8, and its
//! reductions keep results 0 or 1: sum is logical or (`ncclMax`), product logical and
//! (`ncclMin`). NCCL has no 16-bit integers: i16 and u16 tensors are refused with a clear
//! error rather than silently widened (a widened copy would cost a kernel and a buffer per
//! call; say so if a model needs them).

use hvd_core::{DType, Error, ReduceOp, Result};

/// `ncclDataType_t` values (nccl.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum DataType {
    Int8 = 0,
    Uint8 = 1,
    Int32 = 2,
    Int64 = 4,
    Float16 = 6,
    Float32 = 7,
    Float64 = 8,
    Bfloat16 = 9,
}

/// `ncclRedOp_t` values of the built-in reductions (nccl.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum RedOp {
    Sum = 0,
    Prod = 1,
    Max = 2,
    Min = 3,
    Avg = 4,
}

/// The NCCL type `dtype` travels as.
pub fn data_type(dtype: DType) -> Result<DataType> {
    Ok(match dtype {
        DType::U8 | DType::Bool => DataType::Uint8,
        DType::I8 => DataType::Int8,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
        DType::I16 | DType::U16 => return Err(unsupported(dtype, "no 16-bit integer type")),
        other => return Err(unsupported(other, "no such type in this build of hvd-nccl")),
    })
}

fn unsupported(dtype: DType, why: &str) -> Error {
    Error::Unsupported {
        backend: "nccl",
        what: format!("{dtype} tensors (NCCL has {why})"),
    }
}

/// The NCCL reduction for `op` on `dtype` (bool keeps its results 0 or 1).
pub fn red_op(op: ReduceOp, dtype: DType) -> Result<RedOp> {
    Ok(match (op, dtype) {
        (ReduceOp::Sum | ReduceOp::Max, DType::Bool) => RedOp::Max,
        (ReduceOp::Product | ReduceOp::Min, DType::Bool) => RedOp::Min,
        (ReduceOp::Sum, _) => RedOp::Sum,
        (ReduceOp::Average, _) => RedOp::Avg,
        (ReduceOp::Min, _) => RedOp::Min,
        (ReduceOp::Max, _) => RedOp::Max,
        (ReduceOp::Product, _) => RedOp::Prod,
        (other, _) => {
            return Err(Error::Unsupported {
                backend: "nccl",
                what: format!("the {other} reduction"),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_nccl_has_maps_and_16_bit_integers_are_refused_by_name() {
        assert_eq!(data_type(DType::BF16).unwrap() as i32, 9);
        assert_eq!(data_type(DType::Bool).unwrap(), DataType::Uint8);
        assert_eq!(data_type(DType::F32).unwrap() as i32, 7);
        assert_eq!(
            data_type(DType::I16).unwrap_err().to_string(),
            "nccl transport does not support i16 tensors (NCCL has no 16-bit integer type)"
        );
    }

    #[test]
    fn bool_reductions_stay_logical_and_average_is_nccls_own() {
        let red = |op, dtype| red_op(op, dtype).unwrap();
        assert_eq!(red(ReduceOp::Sum, DType::Bool), RedOp::Max);
        assert_eq!(red(ReduceOp::Product, DType::Bool), RedOp::Min);
        assert_eq!(red(ReduceOp::Average, DType::F32) as i32, 4);
        assert_eq!(red(ReduceOp::Product, DType::I32), RedOp::Prod);
    }
}
