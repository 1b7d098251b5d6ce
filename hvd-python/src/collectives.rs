//! The collectives, on tensors Python describes by pointer: (data pointer, byte length,
//! dtype code, shape), or hands over as DLPack capsules. Python checks what only it can
//! (the framework tensor's type, device, layout and contiguity) and holds a described
//! tensor; the codes are decoded here, and hvd's runtime checks the rest at its entry
//! (that dtype and shape span the bytes, the reduction, the root, the splits) before
//! anything touches the memory.

use hvd::Reduction;
use hvd::core::Ready;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::codes::{self, Combine};
use crate::dlpack;
use crate::errors::to_py;
use crate::handle::{Pending, PyHandle, Results};
use crate::memory::TensorMemory;
use crate::running;

/// A tensor from Python: a host tensor described by pointer (data pointer, byte length,
/// dtype code of `_hvd.DTYPES`, shape, the tensor itself, held until the operation
/// completes), worked on in place; a CUDA tensor described the same way plus its device
/// ordinal and the `CUevent` recorded on its producer's stream (the owner holds the event
/// too), worked on in place on its device; or a DLPack capsule, copied into hvd's memory
/// at once (the framework's buffer is never written) and given back as a capsule.
#[derive(FromPyObject)]
pub enum TensorArg {
    Described(usize, usize, u8, Vec<usize>, Py<PyAny>),
    OnDevice(usize, usize, u8, Vec<usize>, Py<PyAny>, u32, usize),
    Dlpack(Py<PyAny>),
}

impl TensorArg {
    fn memory(self, py: Python<'_>, op: &str) -> PyResult<(TensorMemory, Results)> {
        let (ptr, nbytes, dtype_code, shape, owner, device) = match self {
            TensorArg::Described(ptr, nbytes, dtype, shape, owner) => {
                (ptr, nbytes, dtype, shape, owner, None)
            }
            TensorArg::OnDevice(ptr, nbytes, dtype, shape, owner, ordinal, event) => {
                (ptr, nbytes, dtype, shape, owner, Some((ordinal, event)))
            }
            TensorArg::Dlpack(capsule) => {
                let (dtype, shape, bytes) = dlpack::copy_from_capsule(capsule.bind(py), op)?;
                return Ok((TensorMemory::owned(dtype, shape, bytes), Results::Dlpack));
            }
        };
        let dtype = codes::dtype(dtype_code, op)?;
        if let Some((ordinal, event)) = device {
            let ready = match event {
                0 => Ready::Now,
                event => Ready::Event(event as u64),
            };
            let memory = crate::device::memory(ordinal)?;
            // SAFETY: the Python front passes the device pointer and byte length of a
            // contiguous CUDA tensor of device `ordinal` (checked there) and the event
            // recorded after the work that writes it; `owner` keeps both alive, and the
            // front does not touch the tensor until the handle is waited on. The runtime
            // refuses a dtype and shape that do not span `nbytes` before using them.
            let memory = unsafe {
                TensorMemory::device(ptr as u64, nbytes, dtype, shape, ready, memory, owner)
            };
            return Ok((memory, Results::Device));
        }
        // SAFETY: the Python front passes the data pointer and byte length of a
        // contiguous host tensor (checked there) that `owner` keeps alive, and does not
        // touch the tensor until the handle is waited on. The runtime refuses a dtype
        // and shape that do not span `nbytes` before using them.
        let memory = unsafe { TensorMemory::foreign(ptr, nbytes, dtype, shape, owner) };
        Ok((memory, Results::Python))
    }
}

/// Starts an allreduce of `tensor`; `op` may be Adasum. In place, or into `output` (of
/// the same dtype, shape and device, described by pointer) when it is given: a device
/// tensor is then read from `tensor` and written to `output` with no copy of its own.
#[pyfunction]
#[pyo3(signature = (name, tensor, op, prescale = 1.0, postscale = 1.0, process_set = 0, output = None))]
#[allow(clippy::too_many_arguments)]
pub fn allreduce_async(
    py: Python<'_>,
    name: &str,
    tensor: TensorArg,
    op: u8,
    prescale: f64,
    postscale: f64,
    process_set: usize,
    output: Option<TensorArg>,
) -> PyResult<PyHandle> {
    let set = running::process_set(process_set)?;
    let combine = codes::combine(op)?;
    if matches!(combine, Combine::Adasum) && (prescale != 1.0 || postscale != 1.0) {
        return Err(PyValueError::new_err(format!(
            "allreduce of '{name}': Adasum takes no prescale or postscale factor (got \
             {prescale} and {postscale}); it is scale-invariant"
        )));
    }
    if let Some(TensorArg::Dlpack(_)) = output {
        return Err(PyValueError::new_err(format!(
            "allreduce of '{name}': the output of an out-of-place allreduce is described by \
             pointer, not handed over as a DLPack capsule"
        )));
    }
    let (memory, mut results) = tensor.memory(py, "allreduce")?;
    let output = match output {
        Some(output) => {
            // The handle answers as for an in-place call on the output.
            let (output, output_results) = output.memory(py, "allreduce")?;
            results = output_results;
            Some(output)
        }
        None => None,
    };
    let reduction = |op| Reduction {
        op,
        prescale,
        postscale,
    };
    let handle = match (combine, output) {
        (Combine::Reduce(op), None) => set.allreduce_with_async(name, memory, reduction(op)),
        (Combine::Reduce(op), Some(output)) => {
            set.allreduce_into_async(name, memory, output, reduction(op))
        }
        (Combine::Adasum, None) => set.adasum_async(name, memory),
        (Combine::Adasum, Some(output)) => set.adasum_into_async(name, memory, output),
    }
    .map_err(to_py)?;
    Ok(PyHandle::new(Pending::InPlace(handle), results))
}

/// Starts an in-place broadcast of `root`'s tensor (a rank of the set).
#[pyfunction]
#[pyo3(signature = (name, tensor, root, process_set = 0))]
pub fn broadcast_async(
    py: Python<'_>,
    name: &str,
    tensor: TensorArg,
    root: usize,
    process_set: usize,
) -> PyResult<PyHandle> {
    let (memory, results) = tensor.memory(py, "broadcast")?;
    let handle = running::process_set(process_set)?
        .broadcast_async(name, memory, root)
        .map_err(to_py)?;
    Ok(PyHandle::new(Pending::InPlace(handle), results))
}

/// Starts an allgather along the first dim; the result is new memory.
#[pyfunction]
#[pyo3(signature = (name, tensor, process_set = 0))]
pub fn allgather_async(
    py: Python<'_>,
    name: &str,
    tensor: TensorArg,
    process_set: usize,
) -> PyResult<PyHandle> {
    let (memory, results) = tensor.memory(py, "allgather")?;
    let handle = running::process_set(process_set)?
        .allgather_async(name, memory)
        .map_err(to_py)?;
    Ok(PyHandle::new(Pending::Resized(handle), results))
}

/// Starts an alltoall: `splits[r]` rows of the first dim go to rank `r`.
#[pyfunction]
#[pyo3(signature = (name, tensor, splits, process_set = 0))]
pub fn alltoall_async(
    py: Python<'_>,
    name: &str,
    tensor: TensorArg,
    splits: Vec<usize>,
    process_set: usize,
) -> PyResult<PyHandle> {
    let (memory, results) = tensor.memory(py, "alltoall")?;
    let handle = running::process_set(process_set)?
        .alltoall_async(name, memory, &splits)
        .map_err(to_py)?;
    Ok(PyHandle::new(Pending::Split(handle), results))
}

/// Starts a reducescatter: this rank's share of the reduction, as new memory.
#[pyfunction]
#[pyo3(signature = (name, tensor, op, prescale = 1.0, postscale = 1.0, process_set = 0))]
pub fn reducescatter_async(
    py: Python<'_>,
    name: &str,
    tensor: TensorArg,
    op: u8,
    prescale: f64,
    postscale: f64,
    process_set: usize,
) -> PyResult<PyHandle> {
    let reduction = Reduction {
        op: codes::reduce_op(op, "reducescatter")?,
        prescale,
        postscale,
    };
    let (memory, results) = tensor.memory(py, "reducescatter")?;
    let handle = running::process_set(process_set)?
        .reducescatter_with_async(name, memory, reduction)
        .map_err(to_py)?;
    Ok(PyHandle::new(Pending::Resized(handle), results))
}

/// Returns once every member of the set has reached the barrier.
#[pyfunction]
#[pyo3(signature = (process_set = 0))]
pub fn barrier(py: Python<'_>, process_set: usize) -> PyResult<()> {
    let set = running::process_set(process_set)?;
    let _blocked = crate::stall::Blocked::start();
    py.detach(|| set.barrier()).map_err(to_py)
}

/// This rank has no more data; returns the last rank to join.
#[pyfunction]
#[pyo3(signature = (process_set = 0))]
pub fn join(py: Python<'_>, process_set: usize) -> PyResult<usize> {
    let set = running::process_set(process_set)?;
    py.detach(|| set.join()).map_err(to_py)
}
