//! Queuing one call's work on the transport's stream: waits for the inputs' producers,
//! NCCL calls (in a group), and device copies. Failures are NCCL's or the driver's words.

use std::ffi::{c_int, c_void};

use hvd_core::{Ready, bf16, f16};

use crate::comm::Communicator;
use crate::cuda::Stream;
use crate::driver::Driver;
use crate::library::{self, Nccl};
use crate::mapping::{DataType, RedOp};

/// The outcome of queuing: `Err` holds what NCCL or the driver said.
pub(crate) type Queued = Result<(), String>;

/// What a call queues its work with.
pub(crate) struct Launch<'a> {
    pub nccl: &'static Nccl,
    pub driver: &'static Driver,
    pub comm: &'a Communicator,
    pub stream: &'a Stream,
}

fn ptr(address: u64) -> *mut c_void {
    address as *mut c_void
}

impl Launch<'_> {
    fn status(&self, code: c_int) -> Queued {
        match code {
            library::SUCCESS | library::IN_PROGRESS => Ok(()),
            code => Err(self.nccl.describe(code, self.comm.handle)),
        }
    }

    fn stream(&self) -> library::Stream {
        self.stream.handle
    }

    /// Orders the stream's later work after what `ready` names.
    pub(crate) fn wait_for(&self, ready: Ready) -> Queued {
        self.stream
            .wait_for(self.driver, ready)
            .map_err(|e| e.to_string())
    }

    /// Runs `body`'s NCCL calls as one group; the group is closed whatever happens.
    pub(crate) fn group(&self, body: impl FnOnce(&Self) -> Queued) -> Queued {
        // SAFETY: no arguments.
        self.status(unsafe { (self.nccl.group_start)() })?;
        let queued = body(self);
        // SAFETY: closes the group opened above.
        let closed = self.status(unsafe { (self.nccl.group_end)() });
        queued.and(closed)
    }

    /// `count` elements reduced from `send` into `recv` (in place when they are equal).
    pub(crate) fn all_reduce(
        &self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: DataType,
        op: c_int,
    ) -> Queued {
        // SAFETY: `send` and `recv` (equal for an in-place reduction) each hold `count`
        // elements of device memory the caller lends the call.
        self.status(unsafe {
            (self.nccl.all_reduce)(
                ptr(send),
                ptr(recv),
                count,
                dtype as c_int,
                op,
                self.comm.handle,
                self.stream(),
            )
        })
    }

    /// `bytes` bytes at `buf` copied from `root`, in place.
    pub(crate) fn broadcast(&self, buf: u64, bytes: usize, root: usize) -> Queued {
        // SAFETY: as in `all_reduce`.
        self.status(unsafe {
            (self.nccl.broadcast)(
                ptr(buf),
                ptr(buf),
                bytes,
                DataType::Uint8 as c_int,
                root as c_int,
                self.comm.handle,
                self.stream(),
            )
        })
    }

    /// Every rank's `bytes` bytes at `send`, in rank order at `recv`.
    pub(crate) fn all_gather(&self, send: u64, recv: u64, bytes: usize) -> Queued {
        // SAFETY: `send` holds `bytes` bytes and `recv` the group's size times as many.
        self.status(unsafe {
            (self.nccl.all_gather)(
                ptr(send),
                ptr(recv),
                bytes,
                DataType::Uint8 as c_int,
                self.comm.handle,
                self.stream(),
            )
        })
    }

    /// Block `r` of `send` (`count` elements each) reduced onto rank `r`'s `recv`.
    pub(crate) fn reduce_scatter(
        &self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: DataType,
        op: c_int,
    ) -> Queued {
        // SAFETY: `send` holds the group's size times `count` elements, `recv` `count`.
        self.status(unsafe {
            (self.nccl.reduce_scatter)(
                ptr(send),
                ptr(recv),
                count,
                dtype as c_int,
                op,
                self.comm.handle,
                self.stream(),
            )
        })
    }

    /// `count` elements at `send` reduced onto `root`'s `recv` (ignored elsewhere).
    pub(crate) fn reduce(
        &self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: DataType,
        op: c_int,
        root: usize,
    ) -> Queued {
        // SAFETY: `send` holds `count` elements, and `recv` too on the root.
        self.status(unsafe {
            (self.nccl.reduce)(
                ptr(send),
                ptr(recv),
                count,
                dtype as c_int,
                op,
                root as c_int,
                self.comm.handle,
                self.stream(),
            )
        })
    }

    pub(crate) fn send(&self, buf: u64, bytes: usize, peer: usize) -> Queued {
        // SAFETY: `buf` holds `bytes` bytes of device memory.
        self.status(unsafe {
            (self.nccl.send)(
                ptr(buf),
                bytes,
                DataType::Uint8 as c_int,
                peer as c_int,
                self.comm.handle,
                self.stream(),
            )
        })
    }

    pub(crate) fn recv(&self, buf: u64, bytes: usize, peer: usize) -> Queued {
        // SAFETY: `buf` holds `bytes` bytes of device memory.
        self.status(unsafe {
            (self.nccl.recv)(
                ptr(buf),
                bytes,
                DataType::Uint8 as c_int,
                peer as c_int,
                self.comm.handle,
                self.stream(),
            )
        })
    }

    /// A device-to-device copy on the stream.
    pub(crate) fn copy(&self, dst: u64, src: u64, bytes: usize) -> Queued {
        // SAFETY: both ranges are `bytes` bytes of device memory.
        let code = unsafe { (self.driver.memcpy_dtod_async)(dst, src, bytes, self.stream()) };
        self.driver
            .check("cuMemcpyDtoDAsync", code)
            .map_err(|e| e.to_string())
    }

    /// A sum that first multiplies each contribution by `factor` (rounded into `dtype`).
    pub(crate) fn pre_mul_sum(&self, dtype: DataType, factor: f64) -> Result<c_int, String> {
        let mut scalar = [0u8; 8];
        match dtype {
            DataType::Float16 => scalar[..2].copy_from_slice(&f16::from_f64(factor).to_ne_bytes()),
            DataType::Bfloat16 => {
                scalar[..2].copy_from_slice(&bf16::from_f64(factor).to_ne_bytes())
            }
            DataType::Float32 => scalar[..4].copy_from_slice(&(factor as f32).to_ne_bytes()),
            _ => scalar.copy_from_slice(&factor.to_ne_bytes()),
        }
        let mut op: c_int = 0;
        // SAFETY: the scalar is one element of `dtype` in host memory, read before the
        // call returns (ncclScalarHostImmediate).
        self.status(unsafe {
            (self.nccl.red_op_create_pre_mul_sum)(
                &mut op,
                scalar.as_mut_ptr().cast(),
                dtype as c_int,
                library::SCALAR_HOST_IMMEDIATE,
                self.comm.handle,
            )
        })?;
        Ok(op)
    }

    /// Releases an operator made by [`pre_mul_sum`](Self::pre_mul_sum) once the calls that
    /// use it are queued.
    pub(crate) fn destroy_op(&self, op: c_int) {
        // SAFETY: an operator of this communicator, not used by later calls.
        unsafe { (self.nccl.red_op_destroy)(op, self.comm.handle) };
    }
}

/// NCCL's code for a built-in reduction.
pub(crate) fn op_code(op: RedOp) -> c_int {
    op as c_int
}
