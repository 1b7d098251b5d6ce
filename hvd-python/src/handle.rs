//! The handle Python waits on: `wait()` releases the GIL, so other Python threads (and
//! the autograd engine producing the next gradients) run meanwhile.

use std::sync::{Mutex, PoisonError};

use hvd::{Buffer, Handle};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use crate::dlpack;
use crate::errors::to_py;
use crate::memory::TensorMemory;

/// What an operation gives back once it is done.
pub(crate) enum Pending {
    /// The result was written into the caller's tensor (allreduce, broadcast).
    InPlace(Handle<TensorMemory>),
    /// The result is new memory of another shape (allgather, reducescatter).
    Resized(Handle<TensorMemory>),
    /// Alltoall: new memory and the rows received from each rank.
    Split(Handle<(TensorMemory, Vec<usize>)>),
}

/// How an operation's results go back to Python, by how its tensor came.
#[derive(Clone, Copy)]
pub(crate) enum Results {
    /// A tensor described by pointer: the result in place in it, or new memory as a
    /// bytearray.
    Python,
    /// A DLPack capsule: the result as a capsule of hvd's memory, in every case.
    Dlpack,
    /// A CUDA tensor described by pointer: the result in place in it, or new device
    /// memory as a CUDA DLPack capsule.
    Device,
}

/// An operation in flight. Waiting twice is an error; dropping it unwaited is safe (the
/// runtime keeps the tensor alive until the operation completes).
#[pyclass(module = "hvd._hvd", name = "Handle")]
pub(crate) struct PyHandle {
    pending: Mutex<Option<Pending>>,
    results: Results,
}

impl PyHandle {
    pub fn new(pending: Pending, results: Results) -> Self {
        PyHandle {
            pending: Mutex::new(Some(pending)),
            results,
        }
    }
}

/// New memory as Python sees it: (bytearray of the elements, shape).
type Resized = (Py<PyByteArray>, Vec<usize>);

fn resized(py: Python<'_>, memory: &TensorMemory) -> Resized {
    (
        PyByteArray::new(py, memory.bytes()).unbind(),
        memory.dims().to_vec(),
    )
}

/// A result in hvd's memory (on the host or a device) as a DLPack capsule.
fn capsule(py: Python<'_>, memory: TensorMemory) -> PyResult<Py<PyAny>> {
    if memory.on_device() {
        let (dtype, shape, block) = memory
            .into_device_owned()
            .ok_or_else(in_callers_tensor)?
            .map_err(to_py)?;
        return dlpack::export_device(py, dtype, &shape, block);
    }
    let (dtype, shape, bytes) = memory.into_owned().ok_or_else(in_callers_tensor)?;
    dlpack::export(py, dtype, &shape, bytes)
}

fn in_callers_tensor() -> PyErr {
    PyValueError::new_err("the result lives in the caller's tensor, not in hvd's memory")
}

#[pymethods]
impl PyHandle {
    /// Whether the operation has completed.
    fn poll(&self) -> bool {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.as_ref() {
            Some(Pending::InPlace(h) | Pending::Resized(h)) => h.poll(),
            Some(Pending::Split(h)) => h.poll(),
            None => true,
        }
    }

    /// Waits for the operation. For a tensor described by pointer, in-place operations
    /// return None; allgather and reducescatter return (bytearray, shape); alltoall
    /// (bytearray, shape, received rows per rank); for a CUDA tensor, these are a CUDA
    /// DLPack capsule of the result on its device instead (alltoall: (capsule, received
    /// rows per rank)), complete when this returns. For a tensor given as a DLPack
    /// capsule, every operation returns a capsule of the result (alltoall: (capsule,
    /// received rows per rank)).
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let _blocked = crate::stall::Blocked::start();
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyValueError::new_err("this handle was already waited on"))?;
        match (pending, self.results) {
            (Pending::InPlace(h), Results::Python | Results::Device) => {
                py.detach(|| h.wait()).map_err(to_py)?;
                Ok(py.None())
            }
            (Pending::Resized(h), Results::Python) => {
                let memory = py.detach(|| h.wait()).map_err(to_py)?;
                Ok(resized(py, &memory).into_pyobject(py)?.into_any().unbind())
            }
            (Pending::Split(h), Results::Python) => {
                let (memory, rows) = py.detach(|| h.wait()).map_err(to_py)?;
                let (bytes, shape) = resized(py, &memory);
                Ok((bytes, shape, rows).into_pyobject(py)?.into_any().unbind())
            }
            (Pending::InPlace(h) | Pending::Resized(h), Results::Dlpack)
            | (Pending::Resized(h), Results::Device) => {
                let memory = py.detach(|| h.wait()).map_err(to_py)?;
                capsule(py, memory)
            }
            (Pending::Split(h), Results::Dlpack | Results::Device) => {
                let (memory, rows) = py.detach(|| h.wait()).map_err(to_py)?;
                Ok((capsule(py, memory)?, rows)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            }
        }
    }
}
