//! How a rank with nothing to do waits for its provider: blocked in the kernel on the
//! completion queue's wait descriptor where the provider moves data over sockets (its
//! progress then wakes that descriptor), so a rank sharing the core runs meanwhile;
//! elsewhere the engine polls and naps.

use std::ffi::c_int;
use std::ptr;
use std::time::Duration;

use hvd_core::Result;

use super::{AGAIN, Endpoint};
use crate::sys;

/// What [`Endpoint::block`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Waited on the descriptor, until it woke or the timeout passed.
    Waited,
    /// Something is pending that the next read of the queue finds: read again.
    Pending,
    /// This provider cannot block here: nap instead.
    Unable,
}

/// Whether rxm was told (`FI_OFI_RXM_DEF_TCP_WAIT_OBJ`, else `FI_OFI_RXM_DEF_WAIT_OBJ`)
/// to wait on `pollfd` sets: it then leaves its message queue out of the descriptor
/// hvd would block on, and incoming data would wake nobody.
fn rxm_waits_on_pollfd(var: impl Fn(&str) -> Option<String>) -> bool {
    var("FI_OFI_RXM_DEF_TCP_WAIT_OBJ")
        .or_else(|| var("FI_OFI_RXM_DEF_WAIT_OBJ"))
        .is_some_and(|v| v.eq_ignore_ascii_case("pollfd"))
}

impl Endpoint {
    /// Opens the completion queue, with a descriptor to block on where the provider
    /// moves data over sockets and gives one.
    ///
    /// # Safety
    /// The domain is open.
    pub(super) unsafe fn open_cq(&mut self) -> Result<()> {
        let blocks = self.provider.wakes_by_descriptor()
            && !rxm_waits_on_pollfd(|name| std::env::var(name).ok());
        // SAFETY: plain data, for which zero is valid; the domain is open.
        unsafe {
            let mut cq_attr: sys::fi_cq_attr = std::mem::zeroed();
            cq_attr.format = sys::fi_cq_format_FI_CQ_FORMAT_TAGGED;
            if blocks {
                cq_attr.wait_obj = sys::fi_wait_obj_FI_WAIT_FD;
                if sys::fi_cq_open(self.domain, &mut cq_attr, &mut self.cq) == 0 {
                    let mut fd: c_int = -1;
                    let fid = ptr::addr_of_mut!((*self.cq).fid);
                    let arg = ptr::addr_of_mut!(fd).cast();
                    // The descriptor stays the queue's: closing the queue closes it.
                    if sys::fi_control(fid, sys::FI_GETWAIT as c_int, arg) == 0 && fd >= 0 {
                        self.wait_fd = Some(fd);
                        return Ok(());
                    }
                    sys::fi_close(fid);
                    self.cq = ptr::null_mut();
                }
            }
            cq_attr.wait_obj = sys::fi_wait_obj_FI_WAIT_NONE;
            let code = sys::fi_cq_open(self.domain, &mut cq_attr, &mut self.cq);
            self.check("fi_cq_open", code)
        }
    }

    /// Waits up to `timeout` for the provider to have something for this rank, after a
    /// read of the queue found nothing.
    pub(crate) fn block(&mut self, timeout: Duration) -> Blocked {
        let Some(fd) = self.wait_fd else {
            return Blocked::Unable;
        };
        // SAFETY: `cq` and `fabric` are open; the list names one live object.
        let ready = unsafe {
            let mut fids = [ptr::addr_of_mut!((*self.cq).fid)];
            sys::fi_trywait(self.fabric, fids.as_mut_ptr(), 1)
        };
        if ready == AGAIN as c_int {
            return Blocked::Pending;
        }
        if ready == -(sys::FI_ENOSYS as c_int) {
            // The provider cannot say when blocking is safe: nap from now on.
            self.wait_fd = None;
        }
        if ready != 0 {
            return Blocked::Unable;
        }
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let wait = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos().into(),
        };
        // SAFETY: one valid pollfd, a valid timeout and no signal mask.
        unsafe { libc::ppoll(&mut poll, 1, &wait, ptr::null()) };
        Blocked::Waited
    }
}

#[cfg(test)]
mod tests {
    use std::thread;
    use std::time::Instant;

    use super::*;
    use crate::endpoint::Completion;
    use crate::info::choose;
    use crate::library::library;

    const TAG: u64 = 7;

    fn open() -> Result<Endpoint> {
        Endpoint::open(library()?, choose(Some("tcp;ofi_rxm"))?, 2, false)
    }

    /// Reads `endpoint`'s queue until `slot` completes, blocking between reads.
    fn complete(endpoint: &mut Endpoint, slot: usize, block: Duration) -> Vec<Blocked> {
        let started = Instant::now();
        let (mut done, mut blocks) = (Vec::<Completion>::new(), Vec::new());
        while !done.iter().any(|c| c.slot == slot) {
            assert!(started.elapsed() < Duration::from_secs(60), "{blocks:?}");
            if let Err(failed) = endpoint.poll(&mut done) {
                panic!("{}", failed.text);
            }
            blocks.push(endpoint.block(block));
        }
        blocks
    }

    #[test]
    fn rxm_told_to_wait_on_pollfd_sets_is_not_blocked_on() {
        let vars = |pairs: &'static [(&str, &str)]| {
            move |name: &str| {
                let found = pairs.iter().find(|(n, _)| *n == name);
                found.map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(!rxm_waits_on_pollfd(vars(&[])));
        assert!(rxm_waits_on_pollfd(vars(&[(
            "FI_OFI_RXM_DEF_WAIT_OBJ",
            "pollfd"
        )])));
        assert!(rxm_waits_on_pollfd(vars(&[(
            "FI_OFI_RXM_DEF_TCP_WAIT_OBJ",
            "PollFD"
        )])));
        assert!(!rxm_waits_on_pollfd(vars(&[
            ("FI_OFI_RXM_DEF_WAIT_OBJ", "pollfd"),
            ("FI_OFI_RXM_DEF_TCP_WAIT_OBJ", "fd"),
        ])));
    }

    /// A rank blocked with a long timeout wakes when its peer's frame arrives: were the
    /// descriptor the wrong one, every wait would last the whole 5 s.
    #[test]
    #[cfg_attr(
        not(have_libfabric),
        ignore = "needs libfabric: apt-get install libfabric1"
    )]
    fn a_blocked_rank_wakes_when_its_peer_sends() -> Result<()> {
        let (mut receiver, mut sender) = (open()?, open()?);
        let names = vec![receiver.name()?, sender.name()?];
        receiver.insert(&names)?;
        sender.insert(&names)?;
        let slot = receiver.acquire(64)?;
        assert_eq!(receiver.receive(slot, 64, TAG, 0), 0);
        let peer = thread::spawn(move || -> Result<()> {
            thread::sleep(Duration::from_millis(200));
            let slot = sender.acquire(5)?;
            sender.buffer_mut(slot)[..5].copy_from_slice(b"hello");
            let (mut done, posting) = (Vec::new(), Instant::now());
            loop {
                match sender.send(slot, 5, 0, TAG) {
                    0 => break,
                    AGAIN if posting.elapsed() < Duration::from_secs(60) => {
                        drop(sender.poll(&mut done))
                    }
                    code => panic!("fi_tsend: {}", sender.strerror(code as i64)),
                }
            }
            complete(&mut sender, slot, Duration::from_millis(1));
            Ok(())
        });
        let started = Instant::now();
        let blocks = complete(&mut receiver, slot, Duration::from_secs(5));
        let waited = started.elapsed();
        peer.join()
            .unwrap_or_else(|_| panic!("the sender panicked"))?;
        assert_eq!(&receiver.buffer(slot)[..5], b"hello");
        assert!(blocks.contains(&Blocked::Waited), "{blocks:?}");
        assert!(!blocks.contains(&Blocked::Unable), "{blocks:?}");
        assert!(waited < Duration::from_secs(4), "{waited:?}: {blocks:?}");
        Ok(())
    }
}
