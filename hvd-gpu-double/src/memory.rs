//! "Device" memory: addresses in a range mapped `PROT_NONE`, so the host crashes on any
//! access as it would on a GPU's memory, backed by a second mapping at a fixed distance
//! that only the double reads and writes.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::config::settings;

/// Allocations are aligned like `cuMemAlloc`'s.
const ALIGN: usize = 256;
/// What fresh memory holds: not zeros, so code that assumes zeroed memory is caught.
const FRESH: u8 = 0xCD;
/// Freed blocks at least this large give their pages back to the system.
const RELEASE: usize = 1 << 20;

#[derive(Debug, Clone, Copy)]
struct Block {
    len: usize,
    ordinal: u32,
}

#[derive(Debug, Default)]
struct Blocks {
    /// Free ranges: offset -> length.
    free: BTreeMap<usize, usize>,
    /// Live allocations by offset.
    live: BTreeMap<usize, Block>,
    /// Bytes allocated per device.
    used: Vec<usize>,
}

/// The address space of every device of this process.
#[derive(Debug)]
pub(crate) struct Arena {
    /// Start of the `PROT_NONE` range: device addresses.
    device: usize,
    /// Start of the readable mapping behind it.
    shadow: usize,
    capacity: usize,
    per_device: usize,
    blocks: Mutex<Blocks>,
}

/// A live allocation containing an address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found {
    pub start: u64,
    pub len: usize,
    pub ordinal: u32,
}

fn map(len: usize, protection: i32) -> Option<usize> {
    // SAFETY: a fresh anonymous mapping; nothing else refers to the range it returns.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            protection,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (address != libc::MAP_FAILED).then_some(address as usize)
}

/// The process's arena, mapped on first use; `None` when the system refused the
/// mappings (every allocation then fails).
pub(crate) fn arena() -> Option<&'static Arena> {
    static ARENA: OnceLock<Option<Arena>> = OnceLock::new();
    ARENA
        .get_or_init(|| {
            let s = settings();
            let per_device = s.memory.next_multiple_of(ALIGN);
            let capacity = per_device.checked_mul(s.devices as usize)?;
            let device = map(capacity, libc::PROT_NONE)?;
            let shadow = map(capacity, libc::PROT_READ | libc::PROT_WRITE)?;
            let blocks = Blocks {
                free: BTreeMap::from([(0, capacity)]),
                live: BTreeMap::new(),
                used: vec![0; s.devices as usize],
            };
            Some(Arena {
                device,
                shadow,
                capacity,
                per_device,
                blocks: Mutex::new(blocks),
            })
        })
        .as_ref()
}

impl Arena {
    fn blocks(&self) -> std::sync::MutexGuard<'_, Blocks> {
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocates `len` bytes of device `ordinal`'s memory (first fit), filled with
    /// [`FRESH`]; `None` when the device's memory is exhausted.
    pub(crate) fn alloc(&self, len: usize, ordinal: u32) -> Option<u64> {
        let size = len.max(1).next_multiple_of(ALIGN);
        let mut blocks = self.blocks();
        let used = blocks
            .used
            .get(ordinal as usize)
            .copied()
            .unwrap_or(usize::MAX);
        if used.saturating_add(size) > self.per_device {
            return None;
        }
        let (&start, &free) = blocks.free.iter().find(|(_, free)| **free >= size)?;
        blocks.free.remove(&start);
        if free > size {
            blocks.free.insert(start + size, free - size);
        }
        blocks.live.insert(start, Block { len: size, ordinal });
        blocks.used[ordinal as usize] += size;
        drop(blocks);
        // SAFETY: the range is inside the shadow mapping and now belongs to this block
        // alone.
        unsafe { std::ptr::write_bytes((self.shadow + start) as *mut u8, FRESH, size) };
        Some((self.device + start) as u64)
    }

    /// Frees the allocation starting at `ptr`; false when there is none.
    pub(crate) fn free(&self, ptr: u64) -> bool {
        let Some(start) = (ptr as usize).checked_sub(self.device) else {
            return false;
        };
        let mut blocks = self.blocks();
        let Some(block) = blocks.live.remove(&start) else {
            return false;
        };
        blocks.used[block.ordinal as usize] -= block.len;
        if block.len >= RELEASE {
            // SAFETY: the range is inside the shadow mapping and no longer allocated.
            unsafe {
                libc::madvise(
                    (self.shadow + start) as *mut libc::c_void,
                    block.len,
                    libc::MADV_DONTNEED,
                )
            };
        }
        let (mut start, mut len) = (start, block.len);
        // Coalesce with the free neighbours.
        if let Some((&before, &before_len)) = blocks.free.range(..start).next_back()
            && before + before_len == start
        {
            blocks.free.remove(&before);
            start = before;
            len += before_len;
        }
        if let Some(after_len) = blocks.free.remove(&(start + len)) {
            len += after_len;
        }
        blocks.free.insert(start, len);
        true
    }

    /// The live allocation containing `ptr`, if any.
    pub(crate) fn find(&self, ptr: u64) -> Option<Found> {
        let offset = (ptr as usize).checked_sub(self.device)?;
        if offset >= self.capacity {
            return None;
        }
        let blocks = self.blocks();
        let (&start, block) = blocks.live.range(..=offset).next_back()?;
        (offset < start + block.len).then_some(Found {
            start: (self.device + start) as u64,
            len: block.len,
            ordinal: block.ordinal,
        })
    }

    /// The readable bytes behind `ptr..ptr+len`, when they lie in one live allocation
    /// (any length at a null or unallocated address is refused, even 0).
    pub(crate) fn shadow(&self, ptr: u64, len: usize) -> Option<*mut u8> {
        let found = self.find(ptr)?;
        let end = found.start as usize + found.len;
        ((ptr as usize).checked_add(len)? <= end)
            .then(|| (self.shadow + (ptr as usize - self.device)) as *mut u8)
    }

    /// Free and total bytes of device `ordinal`.
    pub(crate) fn info(&self, ordinal: u32) -> (usize, usize) {
        let used = self
            .blocks()
            .used
            .get(ordinal as usize)
            .copied()
            .unwrap_or(0);
        (self.per_device - used, self.per_device)
    }
}

/// `len` bytes of device memory at `ptr` as a slice, for a stream task that owns them
/// while it runs (as a kernel owns its buffers); `None` unless they are allocated.
///
/// # Safety
/// Nothing else may write the bytes while the slice lives (the program's streams are
/// ordered so, or it has a data race as it would on a GPU).
pub(crate) unsafe fn bytes<'a>(ptr: u64, len: usize) -> Option<&'a mut [u8]> {
    if len == 0 {
        return Some(&mut []);
    }
    let shadow = arena()?.shadow(ptr, len)?;
    // SAFETY: `shadow` is `len` mapped, allocated bytes; exclusivity is the caller's.
    Some(unsafe { std::slice::from_raw_parts_mut(shadow, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_found_and_freed() {
        let arena = arena().unwrap();
        let a = arena.alloc(10, 0).unwrap();
        let b = arena.alloc(300, 0).unwrap();
        assert_eq!((a % 256, b % 256), (0, 0));
        assert_eq!(arena.find(b + 299).map(|f| f.start), Some(b));
        assert!(arena.shadow(a, 256).is_some() && arena.shadow(a, 257).is_none());
        // SAFETY: this test owns the allocation.
        let fresh = unsafe { bytes(a, 10) }.unwrap();
        assert_eq!(fresh, &[FRESH; 10]);
        assert!(arena.free(a) && arena.free(b) && !arena.free(b));
        assert!(arena.find(a).is_none() && arena.shadow(b, 1).is_none());
    }
}
