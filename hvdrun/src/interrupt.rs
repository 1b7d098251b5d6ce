//! Ctrl-C and SIGTERM to a launcher: noted in a flag that the supervision loop polls, so
//! the launcher can stop its ranks before it exits.

use std::sync::atomic::{AtomicBool, Ordering};

use hvd_core::{Error, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn note_interrupt(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to the flag [`interrupted`] reads, for the rest of the
/// process's life.
pub(crate) fn install() -> Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is zero-initialisable plain data; the handler only stores to
        // an atomic, which is async-signal-safe, and stays valid for the process's life.
        let result = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_interrupt as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if result != 0 {
            return Err(Error::io(
                format!("installing the handler for signal {signal}"),
                &std::io::Error::last_os_error(),
            ));
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since [`install`].
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Sends `signal` to the process group `leader` leads (each rank runs in its own group,
/// so the children a rank's shell started go too).
pub(crate) fn signal_group(leader: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(leader) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions; the group is one we created
    // for a child we spawned. A group already gone gives ESRCH, which is fine.
    unsafe {
        libc::kill(-pid, signal);
    }
}
