//! [`CudaMemory`]: a CUDA device's memory with a stream, as hvd-core's [`DeviceMemory`].

use std::sync::Arc;
use std::time::Duration;

use hvd_core::{Device as HvdDevice, DeviceBuffer, DeviceCopy, DeviceMemory, Error, Ready, Result};

use crate::config::NcclConfig;
use crate::cuda::{Device, Stream, Waited};
use crate::driver::{self, MemcpyAttributes};

/// The memory of one CUDA device, with copies ordered on a stream: a stream of its own
/// ([`CudaMemory::new`], for tests, host staging and framework glue), or the NCCL
/// transport's (from [`Collective::device_memory`](hvd_core::Collective::device_memory)),
/// whose copies then run before its next collective.
#[derive(Debug)]
pub struct CudaMemory {
    device: Arc<Device>,
    stream: Arc<Stream>,
    /// Whether the stream is this memory's own, to destroy with it.
    owns_stream: bool,
    /// Named in errors.
    rank: usize,
    timeout: Duration,
}

impl CudaMemory {
    /// The memory of CUDA device `ordinal` with a stream of its own, for rank `rank`
    /// (named in errors); waits end after `config.op_timeout`.
    pub fn new(config: &NcclConfig, ordinal: u32, rank: usize) -> Result<Arc<CudaMemory>> {
        let driver = driver::load(&config.cuda_library)?;
        let device = Arc::new(Device::open(driver, ordinal)?);
        let _current = device.enter()?;
        let stream = Arc::new(Stream::new(&device)?);
        Ok(Arc::new(CudaMemory {
            device: device.clone(),
            stream,
            owns_stream: true,
            rank,
            timeout: config.op_timeout,
        }))
    }

    /// The memory of a transport's stream.
    pub(crate) fn on_stream(
        device: Arc<Device>,
        stream: Arc<Stream>,
        rank: usize,
        timeout: Duration,
    ) -> CudaMemory {
        CudaMemory {
            device,
            stream,
            owns_stream: false,
            rank,
            timeout,
        }
    }

    fn driver(&self) -> &'static driver::Driver {
        self.device.driver
    }

    fn timed_out(&self, what: &str) -> Error {
        Error::Timeout {
            rank: self.rank,
            op: "device copy",
            tensor: String::new(),
            waited: self.timeout,
            waiting_for: format!("{what} on cuda:{} to finish", self.device.ordinal),
        }
    }

    fn on_device(&self, buffer: &DeviceBuffer<'_>) -> Result<()> {
        if buffer.device() == self.device() {
            return Ok(());
        }
        Err(Error::Unsupported {
            backend: "nccl",
            what: format!(
                "copying {} memory with the memory of cuda:{}",
                buffer.device(),
                self.device.ordinal
            ),
        })
    }
}

impl DeviceMemory for CudaMemory {
    fn device(&self) -> HvdDevice {
        HvdDevice::Cuda(self.device.ordinal)
    }

    fn ready(&self) -> Ready {
        Ready::Stream(self.stream.handle as u64)
    }

    fn allocate(&self, bytes: usize) -> Result<u64> {
        if bytes == 0 {
            return Ok(0);
        }
        let _current = self.device.enter()?;
        let mut ptr = 0;
        // SAFETY: writes one device address.
        let code = unsafe { (self.driver().mem_alloc)(&mut ptr, bytes) };
        if code != driver::SUCCESS {
            return Err(Error::Io {
                context: format!(
                    "rank {}: cuMemAlloc of {bytes} bytes on cuda:{}",
                    self.rank, self.device.ordinal
                ),
                message: self.driver().describe(code),
                kind: std::io::ErrorKind::OutOfMemory,
            });
        }
        Ok(ptr)
    }

    fn free(&self, ptr: u64) {
        if ptr == 0 {
            return;
        }
        let freed = self.device.enter().and_then(|_current| {
            // SAFETY: an address `allocate` returned; cuMemFree waits for the device's
            // queued work first.
            self.driver()
                .check("cuMemFree", unsafe { (self.driver().mem_free)(ptr) })
        });
        if let Err(e) = freed {
            tracing::warn!("rank {}: freeing device memory: {e}", self.rank);
        }
    }

    fn upload(&self, dst: &DeviceBuffer<'_>, src: &[u8]) -> Result<()> {
        self.on_device(dst)?;
        if src.len() != dst.len() {
            return Err(Error::invalid(
                self.rank,
                "device copy",
                "upload",
                format!("{} host bytes for {} device bytes", src.len(), dst.len()),
            ));
        }
        if src.is_empty() {
            return Ok(());
        }
        let _current = self.device.enter()?;
        self.stream.wait_for(self.driver(), dst.ready())?;
        // SAFETY: `src` is readable for its length and pageable, so the driver has read it
        // when the call returns; `dst` is device memory of that length.
        let code = unsafe {
            (self.driver().memcpy_htod_async)(
                dst.ptr(),
                src.as_ptr().cast(),
                src.len(),
                self.stream.handle,
            )
        };
        self.driver().check("cuMemcpyHtoDAsync", code)
    }

    fn download(&self, src: &DeviceBuffer<'_>, dst: &mut [u8]) -> Result<()> {
        self.on_device(src)?;
        if src.len() != dst.len() {
            return Err(Error::invalid(
                self.rank,
                "device copy",
                "download",
                format!("{} device bytes into {} host bytes", src.len(), dst.len()),
            ));
        }
        if dst.is_empty() {
            return Ok(());
        }
        let _current = self.device.enter()?;
        self.stream.wait_for(self.driver(), src.ready())?;
        // The copy lands in memory this call owns, so that a copy still queued when a
        // wait gives up can never write into the caller's buffer after it is gone.
        let mut landing = vec![0u8; dst.len()];
        // SAFETY: `landing` is writable for its length and outlives the copy: it is only
        // released after the stream has run it, and leaked otherwise.
        let code = unsafe {
            (self.driver().memcpy_dtoh_async)(
                landing.as_mut_ptr().cast(),
                src.ptr(),
                dst.len(),
                self.stream.handle,
            )
        };
        self.driver().check("cuMemcpyDtoHAsync", code)?;
        match self
            .stream
            .synchronize(self.driver(), self.timeout, || None)
        {
            Ok(Waited::Done) => {
                dst.copy_from_slice(&landing);
                Ok(())
            }
            outcome => {
                std::mem::forget(landing);
                Err(outcome
                    .err()
                    .unwrap_or_else(|| self.timed_out("a copy to the host")))
            }
        }
    }

    fn copy(&self, copies: &[DeviceCopy<'_>]) -> Result<()> {
        let copies: Vec<&DeviceCopy<'_>> = copies.iter().filter(|c| !c.src.is_empty()).collect();
        if copies.is_empty() {
            return Ok(());
        }
        for copy in &copies {
            self.on_device(&copy.src)?;
            self.on_device(&copy.dst)?;
            if copy.src.len() != copy.dst.len() {
                return Err(Error::invalid(
                    self.rank,
                    "device copy",
                    "batch",
                    format!("{} bytes into {}", copy.src.len(), copy.dst.len()),
                ));
            }
        }
        let _current = self.device.enter()?;
        let driver = self.driver();
        let mut waited: Vec<Ready> = Vec::new();
        for ready in copies.iter().flat_map(|c| [c.src.ready(), c.dst.ready()]) {
            if !waited.contains(&ready) {
                self.stream.wait_for(driver, ready)?;
                waited.push(ready);
            }
        }
        match driver.memcpy_batch_async {
            Some(batch) if copies.len() > 1 => {
                let mut dsts: Vec<u64> = copies.iter().map(|c| c.dst.ptr()).collect();
                let mut srcs: Vec<u64> = copies.iter().map(|c| c.src.ptr()).collect();
                let mut sizes: Vec<usize> = copies.iter().map(|c| c.src.len()).collect();
                let mut attributes = MemcpyAttributes::in_stream_order();
                let mut first = 0usize;
                // SAFETY: three arrays of `copies.len()` entries and one attribute that
                // applies from copy 0; every range is device memory of its length.
                let code = unsafe {
                    batch(
                        dsts.as_mut_ptr(),
                        srcs.as_mut_ptr(),
                        sizes.as_mut_ptr(),
                        copies.len(),
                        &mut attributes,
                        &mut first,
                        1,
                        self.stream.handle,
                    )
                };
                driver.check("cuMemcpyBatchAsync", code)
            }
            _ => copies.iter().try_for_each(|c| {
                // SAFETY: both ranges are device memory of this length.
                let code = unsafe {
                    (driver.memcpy_dtod_async)(
                        c.dst.ptr(),
                        c.src.ptr(),
                        c.src.len(),
                        self.stream.handle,
                    )
                };
                driver.check("cuMemcpyDtoDAsync", code)
            }),
        }
    }

    fn synchronize(&self) -> Result<()> {
        let _current = self.device.enter()?;
        match self
            .stream
            .synchronize(self.driver(), self.timeout, || None)?
        {
            Waited::Done => Ok(()),
            _ => Err(self.timed_out("the copies queued")),
        }
    }
}

impl Drop for CudaMemory {
    fn drop(&mut self) {
        if self.owns_stream
            && let Ok(_current) = self.device.enter()
        {
            self.stream.destroy(self.driver());
        }
    }
}
