//! The decode threads' CPU priority, below the training loop's: when the host's cores are
//! all busy, a thread of the loop that wakes (the allreduce's, the one that launches the
//! GPU's work) takes a core from a decoder at once instead of waiting its turn, and the
//! decoders still get every cycle the loop leaves.

/// Lowers the calling thread's priority by `steps` of Linux's `nice` (to 19 at most).
/// Where that fails, or off Linux, the thread keeps its priority: it decodes as fast,
/// only without giving way.
pub(crate) fn lower_this_thread(steps: u8) {
    if steps > 0 {
        lower(steps);
    }
}

#[cfg(target_os = "linux")]
fn lower(steps: u8) {
    // SAFETY: gettid has no preconditions; get/setpriority read and set the nice value of
    // this thread (a thread is a process to them on Linux) and touch no memory of ours.
    let result = unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        // getpriority can return -1 as a value: errno tells an error apart.
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, thread);
        if now == -1 && *libc::__errno_location() != 0 {
            Err(std::io::Error::last_os_error())
        } else {
            let lower = (now + i32::from(steps)).min(19);
            match libc::setpriority(libc::PRIO_PROCESS, thread, lower) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!("a decode thread keeps the training loop's priority: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower(_steps: u8) {}
