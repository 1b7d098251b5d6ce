//! The shared-memory segment of a communicator: a header, a control block per rank
//! (process id, state, barrier and split counters), two signature areas per rank, and a
//! slot per rank through which data moves.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Bytes of each rank's data slot: the most a rank puts into one round.
pub(crate) const SLOT: usize = 1 << 20;
/// Bytes of a rank's signature area (one per parity).
pub(crate) const SIG: usize = 16 << 10;
const HEADER: usize = 64;
const CONTROL: usize = 128;
const PAGE: usize = 4096;
const MAGIC: u64 = 0x6876_645f_6e63_636c;

/// A rank's state in its control block.
pub(crate) const JOINED: u32 = 1;
pub(crate) const GONE: u32 = 2;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    size: AtomicU32,
    attached: AtomicU32,
}

/// One rank's control block.
#[repr(C)]
pub(crate) struct Control {
    pub pid: AtomicU32,
    pub state: AtomicU32,
    /// Barriers passed (the stream side).
    pub arrive: AtomicU32,
    /// Split phases passed (the host side).
    pub split: AtomicU32,
    pub color: AtomicI32,
    pub key: AtomicI32,
    pub sig_len: [AtomicU32; 2],
    /// The rank's host hash and device, for NCCL's check of ranks sharing a GPU.
    pub host: AtomicU64,
    pub device: AtomicU32,
}

/// A mapped segment.
#[derive(Debug)]
pub(crate) struct Segment {
    name: String,
    base: *mut u8,
    len: usize,
    size: usize,
}

// SAFETY: the mapping is shared memory accessed through atomics (control) or under the
// barrier protocol (signatures, slots); the pointer is never freed while a Segment lives.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

fn sigs_at(size: usize) -> usize {
    (HEADER + size * CONTROL).next_multiple_of(64)
}

fn slots_at(size: usize) -> usize {
    (sigs_at(size) + size * 2 * SIG).next_multiple_of(PAGE)
}

fn len_for(size: usize) -> usize {
    slots_at(size) + size * SLOT
}

fn shm_name(name: &str) -> std::io::Result<CString> {
    CString::new(name).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

fn map(fd: i32, len: usize) -> std::io::Result<*mut u8> {
    // SAFETY: a shared mapping of an open shared-memory object of at least `len` bytes.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(base.cast())
}

impl Segment {
    /// Creates the segment `name` for `size` ranks.
    pub(crate) fn create(name: &str, size: usize) -> std::io::Result<Segment> {
        let c_name = shm_name(name)?;
        let len = len_for(size);
        // SAFETY: a valid C string; creating a new object, never an existing one.
        let fd = unsafe {
            libc::shm_open(
                c_name.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is the object just created.
        let mapped = if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            Err(std::io::Error::last_os_error())
        } else {
            map(fd, len)
        };
        // SAFETY: the mapping, if any, keeps the object alive.
        unsafe { libc::close(fd) };
        let base = match mapped {
            Ok(base) => base,
            Err(e) => {
                // SAFETY: a valid C string; the object is ours.
                unsafe { libc::shm_unlink(c_name.as_ptr()) };
                return Err(e);
            }
        };
        let segment = Segment {
            name: name.to_owned(),
            base,
            len,
            size,
        };
        segment.header().size.store(size as u32, Ordering::Relaxed);
        segment.header().magic.store(MAGIC, Ordering::Release);
        Ok(segment)
    }

    /// Opens the segment `name` once its creator has finished making it; `None` while it
    /// does not exist or is not ready yet.
    pub(crate) fn open(name: &str) -> std::io::Result<Option<Segment>> {
        let c_name = shm_name(name)?;
        // SAFETY: a valid C string.
        let fd = unsafe { libc::shm_open(c_name.as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(e)
            };
        }
        // SAFETY: a zeroed stat is a valid value for fstat to fill.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open and `stat` writable.
        let ok = unsafe { libc::fstat(fd, &mut stat) } == 0;
        let len = stat.st_size as usize;
        let mapped = if ok && len >= HEADER {
            map(fd, len).map(Some)
        } else {
            Ok(None)
        };
        // SAFETY: the mapping, if any, keeps the object alive.
        unsafe { libc::close(fd) };
        let Some(base) = mapped? else {
            return Ok(None);
        };
        let mut segment = Segment {
            name: name.to_owned(),
            base,
            len,
            size: 0,
        };
        if segment.header().magic.load(Ordering::Acquire) != MAGIC {
            return Ok(None);
        }
        segment.size = segment.header().size.load(Ordering::Relaxed) as usize;
        if len_for(segment.size) != len {
            return Err(std::io::Error::from(std::io::ErrorKind::InvalidData));
        }
        Ok(Some(segment))
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The rank count it was made for.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    fn header(&self) -> &Header {
        // SAFETY: the header sits at the start of the mapping, which holds at least
        // HEADER bytes; its fields are atomics.
        unsafe { &*self.base.cast::<Header>() }
    }

    pub(crate) fn attached(&self) -> &AtomicU32 {
        &self.header().attached
    }

    pub(crate) fn control(&self, rank: usize) -> &Control {
        assert!(rank < self.size);
        // SAFETY: control blocks follow the header, one per rank, inside the mapping.
        unsafe { &*self.base.add(HEADER + rank * CONTROL).cast::<Control>() }
    }

    /// Rank `rank`'s signature area of `parity`.
    pub(crate) fn sig(&self, rank: usize, parity: usize) -> *mut u8 {
        assert!(rank < self.size && parity < 2);
        // SAFETY: inside the mapping (see `len_for`).
        unsafe {
            self.base
                .add(sigs_at(self.size) + (rank * 2 + parity) * SIG)
        }
    }

    /// Rank `rank`'s data slot.
    pub(crate) fn slot(&self, rank: usize) -> *mut u8 {
        assert!(rank < self.size);
        // SAFETY: inside the mapping (see `len_for`).
        unsafe { self.base.add(slots_at(self.size) + rank * SLOT) }
    }

    /// Removes the name, so no one else attaches; the memory stays until the last unmap.
    pub(crate) fn unlink(&self) {
        unlink(&self.name);
    }
}

pub(crate) fn unlink(name: &str) {
    if let Ok(c_name) = shm_name(name) {
        // SAFETY: a valid C string; a missing name is fine.
        unsafe { libc::shm_unlink(c_name.as_ptr()) };
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `create` or `open`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Why a wait for the other ranks ended early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// This rank's communicator was aborted.
    Aborted,
    /// Rank r aborted or destroyed its communicator.
    Left(usize),
    /// Rank r's process exited.
    Exited(usize, u32),
}

/// True when `pid` has exited (no such process, or a zombie).
fn has_exited(pid: u32) -> bool {
    let Ok(id) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(id, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rfind(')')?;
            stat[after + 1..]
                .split_whitespace()
                .next()
                .map(str::to_owned)
        })
        .is_some_and(|state| state == "Z" || state == "X")
}

/// How often a waiting rank looks at its peers' health.
const HEALTH: Duration = Duration::from_millis(20);

/// Waits until `ready(r)` holds for every rank `r` but `me`, watching for an abort of
/// this rank and for peers that leave or die.
pub(crate) fn wait_for_all(
    segment: &Segment,
    me: usize,
    aborted: &AtomicBool,
    ready: impl Fn(&Control) -> bool,
) -> Result<(), Stop> {
    let mut pending: Vec<usize> = (0..segment.size()).filter(|r| *r != me).collect();
    let mut pause = Duration::from_micros(1);
    let mut checked = Instant::now();
    let mut spins = 0u32;
    loop {
        pending.retain(|r| !ready(segment.control(*r)));
        if pending.is_empty() {
            return Ok(());
        }
        if aborted.load(Ordering::Acquire) {
            return Err(Stop::Aborted);
        }
        if checked.elapsed() >= HEALTH {
            checked = Instant::now();
            for r in &pending {
                let control = segment.control(*r);
                if control.state.load(Ordering::Acquire) == GONE {
                    return Err(Stop::Left(*r));
                }
                let pid = control.pid.load(Ordering::Acquire);
                if pid != 0 && pid != std::process::id() && has_exited(pid) {
                    return Err(Stop::Exited(*r, pid));
                }
            }
        }
        if spins < 64 {
            spins += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_micros(500));
        }
    }
}
