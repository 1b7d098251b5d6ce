//! Device memory the layers above a device transport use: allocations, copies to and
//! from the host, and batched copies between device buffers, ordered on a stream of the
//! memory's own.
//!
//! A device transport offers the memory of its own stream through
//! [`Collective::device_memory`](crate::Collective::device_memory): copies queued there run
//! before its next collective, which is how Tensor Fusion packs device tensors without
//! waiting in between. Tests (the conformance suite), host staging and framework glue
//! use a memory of their own stream, whose buffers are [`Ready`] after that stream.

use std::fmt;
use std::sync::Arc;

use crate::{Device, DeviceBuffer, Error, Ready, Result};

/// One device-to-device copy of a batch: `src.len()` bytes (the same as `dst.len()`).
#[derive(Debug, Clone, Copy)]
pub struct DeviceCopy<'a> {
    pub src: DeviceBuffer<'a>,
    pub dst: DeviceBuffer<'a>,
}

/// Memory of one device with a stream of its own. Every wait has a timeout and ends in
/// an [`Error`] naming what it waited for.
pub trait DeviceMemory: Send + Sync + fmt::Debug {
    /// The device the memory belongs to.
    fn device(&self) -> Device;

    /// What the memory's own copies are ready after: its stream.
    fn ready(&self) -> Ready;

    /// Allocates `bytes` bytes (contents unspecified) and returns the device address; 0
    /// bytes need no memory.
    fn allocate(&self, bytes: usize) -> Result<u64>;

    /// Frees an address [`allocate`](Self::allocate) returned, once the device's queued
    /// work that may use it has run.
    fn free(&self, ptr: u64);

    /// Queues a copy of `src` into `dst` on the memory's stream, after the work `dst` is
    /// ready after; returns once `src` has been read.
    fn upload(&self, dst: &DeviceBuffer<'_>, src: &[u8]) -> Result<()>;

    /// Copies `src` into `dst` after the work `src` is ready after; returns with `dst`
    /// written.
    fn download(&self, src: &DeviceBuffer<'_>, dst: &mut [u8]) -> Result<()>;

    /// Queues the copies on the memory's stream as one batch, each after the work its
    /// source is ready after. They are complete after
    /// [`synchronize`](Self::synchronize) or, for a transport's own memory, when its next
    /// collective returns.
    fn copy(&self, copies: &[DeviceCopy<'_>]) -> Result<()>;

    /// Waits until everything queued on the memory's stream has run.
    fn synchronize(&self) -> Result<()>;
}

/// An allocation of a [`DeviceMemory`], freed when dropped.
#[derive(Debug)]
pub struct DeviceBlock {
    memory: Arc<dyn DeviceMemory>,
    ordinal: u32,
    ptr: u64,
    len: usize,
}

impl DeviceBlock {
    /// Allocates `bytes` bytes of `memory`.
    pub fn alloc(memory: &Arc<dyn DeviceMemory>, bytes: usize) -> Result<DeviceBlock> {
        let Device::Cuda(ordinal) = memory.device() else {
            return Err(Error::Unsupported {
                backend: "hvd",
                what: format!("device memory on {}", memory.device()),
            });
        };
        let ptr = memory.allocate(bytes)?;
        Ok(DeviceBlock {
            memory: memory.clone(),
            ordinal,
            ptr,
            len: bytes,
        })
    }

    /// Allocates a block holding `bytes` (queued on the memory's stream).
    pub fn with_contents(memory: &Arc<dyn DeviceMemory>, bytes: &[u8]) -> Result<DeviceBlock> {
        let block = DeviceBlock::alloc(memory, bytes.len())?;
        memory.upload(&block.buffer(), bytes)?;
        Ok(block)
    }

    /// The memory it belongs to.
    pub fn memory(&self) -> &Arc<dyn DeviceMemory> {
        &self.memory
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole block, ready after the memory's stream. Whoever writes through the view
    /// must hold the block exclusively while it does (as the runtime holds a buffer).
    pub fn buffer(&self) -> DeviceBuffer<'_> {
        // SAFETY: the block owns `len` allocated bytes of device `ordinal` for as long as
        // the view borrows it.
        unsafe { DeviceBuffer::cuda(self.ordinal, self.ptr, self.len) }.after(self.memory.ready())
    }

    /// The block's bytes, read back to the host.
    pub fn contents(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.len];
        let memory = self.memory.clone();
        memory.download(&self.buffer(), &mut out)?;
        Ok(out)
    }
}

impl Drop for DeviceBlock {
    fn drop(&mut self) {
        self.memory.free(self.ptr);
    }
}
