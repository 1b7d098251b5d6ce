//! Safe handles over the driver: a device's primary context made current for the length
//! of a guard, a stream of hvd's own, recycled events, and waiting on an event by polling
//! with a deadline (a GPU that never finishes must not hang the host).

use std::ffi::c_int;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hvd_core::{Error, Ready, Result};

use crate::driver::{self, Driver};

/// A device's primary context (retained for the life of the process, as CUDA's runtime
/// does).
#[derive(Debug)]
pub(crate) struct Device {
    pub driver: &'static Driver,
    pub ordinal: u32,
    context: driver::Context,
}

// SAFETY: a context handle may be made current on any thread; the driver is thread-safe.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// While alive, the device's context is current on this thread; the previous one is
/// current again afterwards (the caller's framework may rely on it).
pub(crate) struct Current<'a> {
    driver: &'a Driver,
    previous: driver::Context,
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        // SAFETY: restores the handle cuCtxGetCurrent gave (or null).
        unsafe { (self.driver.ctx_set_current)(self.previous) };
    }
}

/// How many CUDA devices this process sees.
pub(crate) fn device_count(driver: &Driver) -> Result<u32> {
    let mut count: c_int = 0;
    // SAFETY: writes one int.
    driver.check("cuDeviceGetCount", unsafe {
        (driver.device_get_count)(&mut count)
    })?;
    Ok(count.max(0) as u32)
}

impl Device {
    /// The primary context of device `ordinal`.
    pub(crate) fn open(driver: &'static Driver, ordinal: u32) -> Result<Device> {
        let count = device_count(driver)?;
        if ordinal >= count {
            return Err(Error::Config {
                name: "CUDA device".into(),
                value: ordinal.to_string(),
                expected: format!(
                    "a device this process sees ({count} visible; CUDA_VISIBLE_DEVICES narrows them)"
                ),
            });
        }
        let mut device: c_int = 0;
        // SAFETY: writes one int.
        driver.check("cuDeviceGet", unsafe {
            (driver.device_get)(&mut device, ordinal as c_int)
        })?;
        let mut context: driver::Context = std::ptr::null_mut();
        // SAFETY: writes one context handle.
        driver.check("cuDevicePrimaryCtxRetain", unsafe {
            (driver.primary_ctx_retain)(&mut context, device)
        })?;
        Ok(Device {
            driver,
            ordinal,
            context,
        })
    }

    /// Makes the device's context current on this thread until the guard drops.
    pub(crate) fn enter(&self) -> Result<Current<'_>> {
        let mut previous: driver::Context = std::ptr::null_mut();
        // SAFETY: writes one context handle (null when none is current).
        self.driver.check("cuCtxGetCurrent", unsafe {
            (self.driver.ctx_get_current)(&mut previous)
        })?;
        // SAFETY: a context retained in `open`.
        self.driver.check("cuCtxSetCurrent", unsafe {
            (self.driver.ctx_set_current)(self.context)
        })?;
        Ok(Current {
            driver: self.driver,
            previous,
        })
    }

    /// The device's name, as the driver gives it.
    pub(crate) fn name(&self) -> String {
        let mut name = [0 as std::ffi::c_char; 128];
        // SAFETY: writes at most 128 bytes, NUL-terminated.
        let code =
            unsafe { (self.driver.device_get_name)(name.as_mut_ptr(), 128, self.ordinal as c_int) };
        if code != driver::SUCCESS {
            return format!("cuda:{}", self.ordinal);
        }
        // SAFETY: NUL-terminated within the buffer, see above.
        unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

/// How a wait for a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waited {
    Done,
    TimedOut,
    /// The watcher stopped it, saying why.
    Stopped(String),
}

/// A non-blocking stream of hvd's own (it never waits for, nor holds up, the legacy
/// default stream), with events recycled between calls.
#[derive(Debug)]
pub(crate) struct Stream {
    pub handle: driver::Stream,
    events: Mutex<Vec<driver::Event>>,
}

// SAFETY: stream and event handles may be used from any thread with the context current.
unsafe impl Send for Stream {}
// SAFETY: as above; the event pool is behind a mutex.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream on `device` (whose context must be current).
    pub(crate) fn new(device: &Device) -> Result<Stream> {
        let mut handle: driver::Stream = std::ptr::null_mut();
        // SAFETY: writes one stream handle.
        device.driver.check("cuStreamCreate", unsafe {
            (device.driver.stream_create)(&mut handle, driver::STREAM_NON_BLOCKING)
        })?;
        Ok(Stream {
            handle,
            events: Mutex::new(Vec::new()),
        })
    }

    fn event(&self, driver: &Driver) -> Result<driver::Event> {
        if let Some(event) = self.events.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(event);
        }
        let mut event: driver::Event = std::ptr::null_mut();
        // SAFETY: writes one event handle.
        driver.check("cuEventCreate", unsafe {
            (driver.event_create)(&mut event, driver::EVENT_DISABLE_TIMING)
        })?;
        Ok(event)
    }

    fn recycle(&self, event: driver::Event) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }

    /// Makes this stream's later work wait for what `ready` names, without blocking the
    /// host: an event recorded on the producing stream (or the one given).
    pub(crate) fn wait_for(&self, driver: &Driver, ready: Ready) -> Result<()> {
        let event = match ready {
            Ready::Stream(stream) if stream as driver::Stream == self.handle => return Ok(()),
            Ready::Stream(stream) => {
                let event = self.event(driver)?;
                // SAFETY: `stream` is the caller's live stream handle (0: the legacy one).
                let recorded = driver.check("cuEventRecord", unsafe {
                    (driver.event_record)(event, stream as driver::Stream)
                });
                if let Err(e) = recorded {
                    self.recycle(event);
                    return Err(e);
                }
                Some(event)
            }
            Ready::Event(event) => {
                // SAFETY: the caller's live event handle.
                return driver.check("cuStreamWaitEvent", unsafe {
                    (driver.stream_wait_event)(self.handle, event as driver::Event, 0)
                });
            }
            _ => None,
        };
        let Some(event) = event else { return Ok(()) };
        // SAFETY: both handles are live.
        let waited = driver.check("cuStreamWaitEvent", unsafe {
            (driver.stream_wait_event)(self.handle, event, 0)
        });
        // A recorded event may be reused at once: the wait captured its state.
        self.recycle(event);
        waited
    }

    /// Records an event after everything queued so far and polls it until it has run,
    /// until `watch` (asked between polls) says why the wait must stop, or until
    /// `timeout` has passed. `Err` is a failed driver call.
    pub(crate) fn synchronize(
        &self,
        driver: &Driver,
        timeout: Duration,
        mut watch: impl FnMut() -> Option<String>,
    ) -> Result<Waited> {
        let event = self.event(driver)?;
        // SAFETY: both handles are live.
        driver.check("cuEventRecord", unsafe {
            (driver.event_record)(event, self.handle)
        })?;
        let started = Instant::now();
        let mut pause = Duration::from_micros(2);
        let mut polls = 0u32;
        let outcome = loop {
            // SAFETY: a live event.
            match unsafe { (driver.event_query)(event) } {
                driver::SUCCESS => break Ok(Waited::Done),
                driver::NOT_READY => {}
                code => {
                    break driver
                        .check("cuEventQuery", code)
                        .map(|()| Waited::TimedOut);
                }
            }
            if let Some(why) = watch() {
                break Ok(Waited::Stopped(why));
            }
            if started.elapsed() >= timeout {
                break Ok(Waited::TimedOut);
            }
            // Short operations finish within microseconds: poll briskly first.
            polls += 1;
            if polls < 50 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
        };
        // An event still pending on a stream that may never finish is dropped, not reused.
        if matches!(outcome, Ok(Waited::Done)) {
            self.recycle(event);
        }
        outcome
    }

    /// Destroys the stream and its events (the device's context must be current).
    pub(crate) fn destroy(&self, driver: &Driver) {
        for event in self
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            // SAFETY: an event of this stream's pool, not used after this.
            unsafe { (driver.event_destroy)(event) };
        }
        // SAFETY: the stream is not used after this; its queued work still runs.
        unsafe { (driver.stream_destroy)(self.handle) };
    }
}
