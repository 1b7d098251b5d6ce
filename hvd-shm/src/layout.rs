//! Where everything lives in a segment: a header, one control block per rank, then two
//! slots per rank. Pure arithmetic, so every rank computes the same offsets.

/// Control blocks are this far apart: two cache lines, because x86 prefetches lines in
/// pairs and a rank's counter must not share a pair with another's.
pub(crate) const LINE: usize = 128;

/// Slots start on a page and are whole pages, so copies into them stay aligned.
const PAGE: usize = 4096;

/// The most ranks one segment serves; more ranks than this on one host is not a job
/// anyone runs, and the bound keeps every size below comfortably representable.
pub(crate) const MAX_RANKS: usize = 256;

/// Offsets in a segment of `ranks` ranks with slots of `slot_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    ranks: usize,
    slot_bytes: usize,
}

impl Layout {
    /// `slot_bytes` is raised to hold 64 bytes per rank and rounded up to whole pages;
    /// callers bound both arguments (ranks by [`MAX_RANKS`], slots by the config), so no
    /// sum below can overflow.
    pub(crate) fn new(ranks: usize, slot_bytes: usize) -> Self {
        let slot_bytes = slot_bytes.max(64 * ranks);
        Layout {
            ranks,
            slot_bytes: slot_bytes.div_ceil(PAGE) * PAGE,
        }
    }

    pub(crate) fn ranks(&self) -> usize {
        self.ranks
    }

    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Bytes of the per-destination region when a slot is cut into one region per rank:
    /// a multiple of 64, so a region holds whole elements of every dtype.
    pub(crate) fn region_bytes(&self) -> usize {
        self.slot_bytes / self.ranks / 64 * 64
    }

    /// Offset of the control block of `rank`; the header takes the first [`LINE`].
    pub(crate) fn control(&self, rank: usize) -> usize {
        LINE * (1 + rank)
    }

    fn data(&self) -> usize {
        (LINE * (1 + self.ranks)).div_ceil(PAGE) * PAGE
    }

    /// Offset of the slot of `rank` used by steps of `parity` (0 or 1).
    pub(crate) fn slot(&self, rank: usize, parity: usize) -> usize {
        self.data() + (2 * rank + parity) * self.slot_bytes
    }

    /// Length of the whole segment.
    pub(crate) fn len(&self) -> usize {
        self.data() + 2 * self.ranks * self.slot_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_blocks_and_slots_never_overlap() {
        let layout = Layout::new(3, 5000);
        assert_eq!(layout.slot_bytes(), 8192);
        assert_eq!(layout.control(2), 384);
        assert_eq!(layout.slot(0, 0), 4096);
        assert_eq!(layout.slot(0, 1), 4096 + 8192);
        assert_eq!(layout.slot(2, 1), 4096 + 5 * 8192);
        assert_eq!(layout.len(), 4096 + 6 * 8192);
    }

    #[test]
    fn regions_hold_whole_elements_of_every_dtype() {
        let layout = Layout::new(3, 4096);
        assert_eq!(layout.region_bytes(), 1344);
        assert!(layout.region_bytes() * 3 <= layout.slot_bytes());
        assert_eq!(Layout::new(MAX_RANKS, 4096).region_bytes(), 64);
        assert_eq!(Layout::new(64, 4096).region_bytes(), 64);
    }

    #[test]
    fn many_ranks_push_the_slots_to_a_later_page() {
        let layout = Layout::new(40, 4096);
        assert_eq!(layout.slot(0, 0), 8192);
    }
}
