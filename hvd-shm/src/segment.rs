//! The shared-memory segment: created by one rank under `/dev/shm`, mapped by all, and
//! unlinked as soon as everyone has it mapped.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::layout::Layout;

/// Written last by the creator, so a segment that has it is fully set up: "HVDSHM01".
const MAGIC: u64 = u64::from_le_bytes(*b"HVDSHM01");

/// The first line of a segment. Plain atomics, because other processes read and write
/// them while this one does.
#[repr(C)]
pub(crate) struct Header {
    magic: AtomicU64,
    /// Random per group, published with the name: proves the segment is this group's.
    token: AtomicU64,
    ranks: AtomicU64,
    slot_bytes: AtomicU64,
    /// How many ranks have mapped the segment.
    pub(crate) attached: AtomicU32,
    /// The first failure any rank saw (see `fault`), 0 while there is none.
    pub(crate) abort: AtomicU64,
}

/// What a rank says about the step it last published, for one parity.
#[repr(C)]
pub(crate) struct Desc {
    /// Which operation (and algorithm, and root) the step belongs to.
    pub(crate) code: AtomicU64,
    /// A size every rank must agree on.
    pub(crate) size: AtomicU64,
    /// A value ranks exchange through the step.
    pub(crate) value: AtomicU64,
}

/// One rank's control block: written by its rank, read by all.
#[repr(C)]
pub(crate) struct Control {
    /// The last step this rank published; also the futex word peers sleep on.
    pub(crate) seq: AtomicU32,
    /// How many peers sleep on `seq`, so a publisher only makes the wake-up call when
    /// someone needs it.
    pub(crate) waiters: AtomicU32,
    /// The rank's process id, 0 until it attaches.
    pub(crate) pid: AtomicU32,
    /// Set when the rank's collective is dropped: it will publish no more steps.
    pub(crate) left: AtomicU32,
    /// Step descriptions, by step parity.
    pub(crate) desc: [Desc; 2],
}

/// A mapping of a group's segment.
pub(crate) struct Segment {
    base: NonNull<u8>,
    layout: Layout,
    name: String,
}

// SAFETY: the mapping is shared memory that every field access goes through atomics or
// through the step protocol, which gives each byte of a slot one writer at a time; the
// pointer itself is never changed after `map`.
unsafe impl Send for Segment {}
// SAFETY: as for Send: `&Segment` only hands out atomics and, via `&mut self` or the
// protocol, slot bytes.
unsafe impl Sync for Segment {}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("name", &self.name)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(format!("/{name}")).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Why a mapped segment is not the one a rank was told about.
#[derive(Debug)]
pub(crate) enum Refusal {
    Io(io::Error),
    Foreign(String),
}

impl Segment {
    /// Creates segment `name` for `layout`, stamped with `token`. A file of that name
    /// left by a crashed job is removed first: its mappings keep their memory, and this
    /// group gets fresh zeroed pages.
    pub(crate) fn create(name: &str, layout: Layout, token: u64) -> io::Result<Segment> {
        let path = c_name(name)?;
        let fd = match open(&path, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                tracing::warn!("removing a stale shared-memory segment '{name}'");
                unlink(name);
                open(&path, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR)?
            }
            other => other?,
        };
        let made = size_to(&fd, layout.len()).and_then(|()| map(&fd, layout.len()));
        let base = match made {
            Ok(base) => base,
            Err(e) => {
                unlink(name);
                return Err(e);
            }
        };
        let segment = Segment {
            base,
            layout,
            name: name.into(),
        };
        let header = segment.header();
        header.token.store(token, Ordering::Relaxed);
        header.ranks.store(layout.ranks() as u64, Ordering::Relaxed);
        header
            .slot_bytes
            .store(layout.slot_bytes() as u64, Ordering::Relaxed);
        header.magic.store(MAGIC, Ordering::Release);
        Ok(segment)
    }

    /// Maps the existing segment `name`, checking that it is the one stamped with `token`
    /// for `layout`; anything else (a leftover of another job, a file of the wrong size)
    /// is refused before a byte of it is used.
    pub(crate) fn attach(name: &str, layout: Layout, token: u64) -> Result<Segment, Refusal> {
        let path = c_name(name).map_err(Refusal::Io)?;
        let fd = open(&path, libc::O_RDWR).map_err(Refusal::Io)?;
        let len = file_len(&fd).map_err(Refusal::Io)?;
        if len != layout.len() as u64 {
            return Err(Refusal::Foreign(format!(
                "it holds {len} bytes where this group needs {}",
                layout.len()
            )));
        }
        let base = map(&fd, layout.len()).map_err(Refusal::Io)?;
        let segment = Segment {
            base,
            layout,
            name: name.into(),
        };
        let header = segment.header();
        let found = (
            header.magic.load(Ordering::Acquire),
            header.token.load(Ordering::Relaxed),
            header.ranks.load(Ordering::Relaxed),
            header.slot_bytes.load(Ordering::Relaxed),
        );
        let want = (
            MAGIC,
            token,
            layout.ranks() as u64,
            layout.slot_bytes() as u64,
        );
        if found != want {
            return Err(Refusal::Foreign(format!(
                "its header (magic, token, ranks, slot bytes) is {found:x?} where this group expects {want:x?}"
            )));
        }
        Ok(segment)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the mapping is at least a page long and page-aligned, the header is the
        // first 128 bytes, and it holds only atomics, for which any bytes are valid.
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    pub(crate) fn control(&self, rank: usize) -> &Control {
        let offset = self.layout.control(rank);
        // SAFETY: `Layout` puts control blocks of 128 bytes (more than `Control` needs)
        // inside the mapping at 128-byte offsets; they hold only atomics.
        unsafe { &*self.base.as_ptr().add(offset).cast::<Control>() }
    }

    /// The slot of `rank` for steps of `parity`, to read.
    pub(crate) fn slot(&self, rank: usize, parity: usize) -> &[u8] {
        let offset = self.layout.slot(rank, parity);
        // SAFETY: the slot lies inside the mapping (see `Layout`). The step protocol lets
        // its owner write it only after every rank has finished reading it, so nothing
        // writes these bytes while this borrow, which ends within the step, lives.
        unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(offset), self.layout.slot_bytes())
        }
    }

    /// The slot of `rank` for steps of `parity`, to write; only its owner calls this.
    pub(crate) fn slot_mut(&mut self, rank: usize, parity: usize) -> &mut [u8] {
        let offset = self.layout.slot(rank, parity);
        // SAFETY: as for `slot`; and the protocol guarantees no peer reads these bytes
        // until the owner publishes the step, after this borrow has ended.
        unsafe {
            std::slice::from_raw_parts_mut(self.base.as_ptr().add(offset), self.layout.slot_bytes())
        }
    }

    /// Every rank's `seq` word, to wake whoever sleeps on any of them.
    pub(crate) fn wake_everyone(&self) {
        for rank in 0..self.layout.ranks() {
            crate::futex::wake_all(&self.control(rank).seq);
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base` and the length are exactly what `mmap` returned and was given;
        // nothing borrowed from the mapping outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.layout.len());
        }
    }
}

/// Removes the name of segment `name`; mappings keep working. A name already gone is fine.
pub(crate) fn unlink(name: &str) {
    if let Ok(path) = c_name(name) {
        // SAFETY: `path` is a valid NUL-terminated string.
        unsafe {
            libc::shm_unlink(path.as_ptr());
        }
    }
}

fn open(path: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `path` is a valid NUL-terminated string; the mode only matters on create.
    let fd = unsafe { libc::shm_open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets the length and reserves the memory now, so a full `/dev/shm` is an error here
/// rather than a SIGBUS in the middle of a collective.
fn size_to(fd: &OwnedFd, len: usize) -> io::Result<()> {
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `fd` is an open shared-memory object.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; posix_fallocate returns the error number instead of setting errno.
    match unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

fn file_len(fd: &OwnedFd) -> io::Result<u64> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten by fstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `stat` is a valid place to write to.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    u64::try_from(stat.st_size).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

fn map(fd: &OwnedFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of an open file descriptor; the kernel picks the
    // address, and the result is checked below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(ptr.cast()).ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(test: &str) -> String {
        format!("hvd-shm-unit-{test}-{}", std::process::id())
    }

    #[test]
    fn a_stale_file_of_the_same_name_is_replaced_by_a_fresh_segment() {
        let name = name("stale");
        let path = std::path::Path::new("/dev/shm").join(&name);
        std::fs::write(&path, vec![0xEEu8; 12345]).unwrap();
        let layout = Layout::new(2, 4096);
        let created = Segment::create(&name, layout, 7).unwrap();
        let attached = Segment::attach(&name, layout, 7).unwrap();
        assert_eq!(attached.control(1).seq.load(Ordering::Relaxed), 0);
        assert!(attached.slot(1, 1).iter().all(|b| *b == 0));
        unlink(&name);
        drop((created, attached));
        assert!(!path.exists());
    }

    #[test]
    fn a_segment_of_another_group_is_refused_before_use() {
        let name = name("foreign");
        let layout = Layout::new(2, 4096);
        let created = Segment::create(&name, layout, 7).unwrap();
        let Err(Refusal::Foreign(why)) = Segment::attach(&name, layout, 8) else {
            panic!("a segment with another token was accepted");
        };
        assert!(
            why.starts_with("its header (magic, token, ranks, slot bytes) is"),
            "{why}"
        );
        let Err(Refusal::Foreign(why)) = Segment::attach(&name, Layout::new(3, 4096), 7) else {
            panic!("a segment of another size was accepted");
        };
        assert_eq!(why, "it holds 20480 bytes where this group needs 28672");
        unlink(&name);
        drop(created);
    }
}
