//! hvd's dtypes and reductions as MPI datatypes and operations.

use hvd_core::{DType, Error, ReduceOp, Result};
use mpi::ffi;

use crate::user_ops::UserOps;

/// The MPI datatype that moves `dtype`. f16 and bf16, which MPI lacks, travel as 16-bit
/// words and bool as bytes; their reductions are user-defined operations.
pub(crate) fn datatype(dtype: DType) -> Result<ffi::MPI_Datatype> {
    // SAFETY: reading predefined datatype handles of the initialised library.
    Ok(unsafe {
        match dtype {
            DType::U8 | DType::Bool => ffi::RSMPI_UINT8_T,
            DType::I8 => ffi::RSMPI_INT8_T,
            DType::U16 | DType::F16 | DType::BF16 => ffi::RSMPI_UINT16_T,
            DType::I16 => ffi::RSMPI_INT16_T,
            DType::I32 => ffi::RSMPI_INT32_T,
            DType::I64 => ffi::RSMPI_INT64_T,
            DType::F32 => ffi::RSMPI_FLOAT,
            DType::F64 => ffi::RSMPI_DOUBLE,
            other => {
                return Err(Error::Unsupported {
                    backend: "mpi",
                    what: format!("dtype {other}"),
                });
            }
        }
    })
}

/// The MPI operation that combines `dtype` values for `op`: MPI's own where it has the
/// type and the same semantics, else one of hvd's user-defined operations.
pub(crate) fn operation(ops: &UserOps, dtype: DType, op: ReduceOp) -> ffi::MPI_Op {
    if let Some(user) = ops.get(dtype, op) {
        return user;
    }
    // SAFETY: reading predefined operation handles of the initialised library.
    unsafe {
        match (dtype, op.combining_op()) {
            (DType::Bool, ReduceOp::Sum | ReduceOp::Max) => ffi::RSMPI_LOR,
            (DType::Bool, _) => ffi::RSMPI_LAND,
            (_, ReduceOp::Min) => ffi::RSMPI_MIN,
            (_, ReduceOp::Max) => ffi::RSMPI_MAX,
            (_, ReduceOp::Product) => ffi::RSMPI_PROD,
            _ => ffi::RSMPI_SUM,
        }
    }
}
