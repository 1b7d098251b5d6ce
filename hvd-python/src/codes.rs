//! The integer codes a tensor's dtype and an operation's reduce op cross the FFI as:
//! hvd-core's wire codes, exported to Python once (`_hvd.DTYPES`, `_hvd.REDUCE_OPS`,
//! keyed by the names frameworks use), so no call parses a name.

use hvd::{DType, ReduceOp};
use pyo3::exceptions::{PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The code of Adasum, after hvd-core's reduce ops: Adasum is no `ReduceOp` (it combines
/// whole tensors, not elements).
const ADASUM: u8 = ReduceOp::ALL.len() as u8;

/// A dtype's name as torch, NumPy and TensorFlow spell it (hvd's own for a dtype they
/// do not name).
const fn framework_name(dtype: DType) -> &'static str {
    match dtype {
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::U16 => "uint16",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::Bool => "bool",
        other => other.name(),
    }
}

/// Adds `DTYPES` (framework name to code) and `REDUCE_OPS` (lower-case name to code,
/// Adasum included) to the module.
pub fn export(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let dtypes = PyDict::new(m.py());
    for dtype in DType::ALL {
        dtypes.set_item(framework_name(dtype), dtype.code())?;
    }
    m.add("DTYPES", dtypes)?;
    let ops = PyDict::new(m.py());
    for op in ReduceOp::ALL {
        ops.set_item(op.name(), op.code())?;
    }
    ops.set_item("adasum", ADASUM)?;
    m.add("REDUCE_OPS", ops)
}

/// The dtype of `code`, for a tensor of operation `op`.
pub fn dtype(code: u8, op: &str) -> PyResult<DType> {
    DType::from_code(code).ok_or_else(|| {
        let names: Vec<&str> = DType::ALL.into_iter().map(framework_name).collect();
        PyValueError::new_err(format!(
            "{op}: hvd cannot move tensors of dtype code {code}; it supports {} \
             (hvd._hvd.DTYPES)",
            names.join(", ")
        ))
    })
}

/// How the ranks' tensors combine: one of hvd's reduce ops, or Adasum.
pub enum Combine {
    Reduce(ReduceOp),
    Adasum,
}

/// The combination of `code`.
pub fn combine(code: u8) -> PyResult<Combine> {
    if code == ADASUM {
        return Ok(Combine::Adasum);
    }
    ReduceOp::from_code(code)
        .map(Combine::Reduce)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown reduce op code {code}: expected one of hvd._hvd.REDUCE_OPS (sum, \
             average, min, max, product or adasum)"
            ))
        })
}

/// The reduce op of `code` for operation `op`, which has no Adasum form.
pub fn reduce_op(code: u8, op: &str) -> PyResult<ReduceOp> {
    match combine(code)? {
        Combine::Reduce(reduce) => Ok(reduce),
        Combine::Adasum => Err(PyNotImplementedError::new_err(format!(
            "{op} does not support Adasum: Adasum combines whole tensors (allreduce, \
             DistributedOptimizer); use Sum or Average"
        ))),
    }
}
