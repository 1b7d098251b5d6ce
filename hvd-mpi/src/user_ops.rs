//! User-defined MPI operations that reduce with hvd-core's kernels, for what MPI's own
//! operations lack or define differently: f16 and bf16 (no MPI type), and float min/max
//! (MPI's leave NaN and -0 to the order of the ranks; hvd's are IEEE 754-2019
//! `minimumNumber`/`maximumNumber`).

use std::os::raw::{c_int, c_void};

use hvd_core::{DType, ReduceOp, Result, kernels};
use mpi::ffi;

use crate::error::setup_error;

type Callback = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut ffi::MPI_Datatype);

/// `inout[i] = in[i] (op) inout[i]` over `len` elements, with the kernels of hvd-core.
///
/// # Safety
/// MPI calls it with `len` elements of the dtype in both buffers.
unsafe extern "C" fn combine<const DTYPE: u8, const OP: u8>(
    input: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _datatype: *mut ffi::MPI_Datatype,
) {
    let (Some(dtype), Some(op)) = (DType::from_code(DTYPE), ReduceOp::from_code(OP)) else {
        return;
    };
    // SAFETY: MPI passes a valid element count.
    let count = usize::try_from(unsafe { *len }).unwrap_or(0);
    let bytes = count * dtype.size();
    // SAFETY: MPI passes two distinct buffers of `len` elements each.
    let (src, acc) = unsafe {
        (
            std::slice::from_raw_parts(input as *const u8, bytes),
            std::slice::from_raw_parts_mut(inout as *mut u8, bytes),
        )
    };
    kernels::reduce_into(dtype, op, acc, src);
}

macro_rules! table {
    ($($dtype:ident $op:ident),* $(,)?) => {
        [$((
            DType::$dtype,
            ReduceOp::$op,
            combine::<{ DType::$dtype.code() }, { ReduceOp::$op.code() }> as Callback,
        )),*]
    };
}

/// The reductions done by a user-defined operation.
const CALLBACKS: [(DType, ReduceOp, Callback); 12] = table!(
    F16 Sum, F16 Min, F16 Max, F16 Product,
    BF16 Sum, BF16 Min, BF16 Max, BF16 Product,
    F32 Min, F32 Max, F64 Min, F64 Max,
);

/// The user-defined operations, created once per process after MPI_Init.
pub(crate) struct UserOps {
    ops: Vec<(DType, ReduceOp, ffi::MPI_Op)>,
}

// SAFETY: MPI_Op handles are immutable after creation and valid in every thread (hvd
// initialises MPI with a thread level that allows calls from any thread).
unsafe impl Send for UserOps {}
// SAFETY: as for Send; nothing mutates the handles until `free`, which takes `&mut self`.
unsafe impl Sync for UserOps {}

impl UserOps {
    pub fn create() -> Result<UserOps> {
        let mut ops = Vec::with_capacity(CALLBACKS.len());
        for (dtype, op, callback) in CALLBACKS {
            // SAFETY: a handle is a pointer or an integer (by implementation), for which
            // zero is valid; MPI_Op_create overwrites it.
            let mut handle: ffi::MPI_Op = unsafe { std::mem::zeroed() };
            // SAFETY: MPI is initialised; every callback is commutative.
            let code = unsafe { ffi::MPI_Op_create(Some(callback), 1, &mut handle) };
            if code != 0 {
                return Err(setup_error("MPI_Op_create", code));
            }
            ops.push((dtype, op, handle));
        }
        Ok(UserOps { ops })
    }

    /// The user-defined operation for `op` over `dtype`, if hvd defines one.
    pub fn get(&self, dtype: DType, op: ReduceOp) -> Option<ffi::MPI_Op> {
        let op = op.combining_op();
        self.ops
            .iter()
            .find(|(d, o, _)| *d == dtype && *o == op)
            .map(|(_, _, handle)| *handle)
    }

    /// Frees every operation (before MPI_Finalize).
    pub fn free(&mut self) {
        for (_, _, mut handle) in self.ops.drain(..) {
            // SAFETY: the handle came from MPI_Op_create and no call uses it any more.
            unsafe { ffi::MPI_Op_free(&mut handle) };
        }
    }
}
