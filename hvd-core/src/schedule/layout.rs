//! The bytes one operation moves: a batch of tensors seen as one range of offsets, so that
//! a batch travels as one message (or one ring pass) without being copied into a buffer.
//!
//! Sends gather straight from the tensors and receives scatter straight into them
//! (`writev`/`readv`). Every tensor keeps its dtype, so reductions over a range apply the
//! right kernel to each part, and [`Layout::align_down`] keeps cuts between elements.

use std::io::{self, IoSlice, IoSliceMut};
use std::ops::Range;

use crate::{DType, ReduceOp, Reduction, kernels};

/// At most this many pieces go into one `writev`/`readv` call (far below `IOV_MAX`).
pub const MAX_IOV: usize = 64;

#[derive(Debug)]
enum Bytes<'a> {
    /// An input the operation only sends from.
    Shared(&'a [u8]),
    /// A tensor the operation writes its result into.
    Exclusive(&'a mut [u8]),
}

#[derive(Debug)]
struct Region<'a> {
    start: usize,
    dtype: DType,
    bytes: Bytes<'a>,
}

impl Region<'_> {
    fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Shared(b) => b,
            Bytes::Exclusive(b) => b,
        }
    }

    fn bytes_mut(&mut self) -> io::Result<&mut [u8]> {
        match &mut self.bytes {
            Bytes::Shared(_) => Err(io::Error::other(
                "a received frame targets the read-only input of the call",
            )),
            Bytes::Exclusive(b) => Ok(b),
        }
    }

    fn end(&self) -> usize {
        self.start + self.bytes().len()
    }
}

/// The tensors of one call, end to end.
#[derive(Debug, Default)]
pub struct Layout<'a> {
    regions: Vec<Region<'a>>,
    len: usize,
}

impl<'a> Layout<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a tensor the call writes into.
    pub fn push(&mut self, dtype: DType, bytes: &'a mut [u8]) {
        self.push_region(dtype, Bytes::Exclusive(bytes));
    }

    /// Appends an input the call only reads.
    pub fn push_shared(&mut self, dtype: DType, bytes: &'a [u8]) {
        self.push_region(dtype, Bytes::Shared(bytes));
    }

    fn push_region(&mut self, dtype: DType, bytes: Bytes<'a>) {
        let region = Region {
            start: self.len,
            dtype,
            bytes,
        };
        self.len = region.end();
        // Empty tensors take no offsets; leaving them out keeps lookups simple.
        if region.end() > region.start {
            self.regions.push(region);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the call moves no bytes (a barrier, or only empty tensors).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the region holding `offset` (`regions.len()` at the end).
    fn region_at(&self, offset: usize) -> usize {
        self.regions.partition_point(|r| r.end() <= offset)
    }

    /// The nearest element boundary at or below `offset`.
    pub fn align_down(&self, offset: usize) -> usize {
        match self.regions.get(self.region_at(offset)) {
            Some(r) if offset > r.start => {
                let size = r.dtype.size();
                r.start + (offset - r.start) / size * size
            }
            _ => offset.min(self.len),
        }
    }

    /// Splits `range` into the fewest frames of at most about `chunk_bytes` (nearly equal,
    /// cut between elements): at least one, empty for an empty range.
    pub fn frames(&self, range: Range<usize>, chunk_bytes: usize) -> Vec<Range<usize>> {
        let parts = range.len().div_ceil(chunk_bytes.max(1)).max(1);
        self.split(range, parts)
    }

    /// Splits `range` into `parts` consecutive ranges of nearly equal size, cut between
    /// elements. Some parts may be empty.
    pub fn split(&self, range: Range<usize>, parts: usize) -> Vec<Range<usize>> {
        let len = range.end - range.start;
        let cut = |i: usize| {
            self.align_down(range.start + len * i / parts)
                .max(range.start)
        };
        (0..parts)
            .map(|i| {
                cut(i)..if i + 1 == parts {
                    range.end
                } else {
                    cut(i + 1)
                }
            })
            .collect()
    }

    /// Calls `each` with the region index and the region-local range of every region
    /// part that `range` covers, in order.
    fn for_each_part(&self, range: Range<usize>, mut each: impl FnMut(usize, Range<usize>)) {
        let mut at = range.start;
        let mut index = self.region_at(at);
        while at < range.end {
            let Some(r) = self.regions.get(index) else {
                return;
            };
            let end = range.end.min(r.end());
            each(index, at - r.start..end - r.start);
            at = end;
            index += 1;
        }
    }

    /// `range` cut short after its first `n` regions: a vectored call takes no more, and
    /// walking the rest of a frame of thousands of tensors on every call would make each
    /// read and write cost O(tensors).
    fn first_regions(&self, range: Range<usize>, n: usize) -> Range<usize> {
        let Some(last) = (self.region_at(range.start) + n).checked_sub(1) else {
            return range.start..range.start;
        };
        let end = self
            .regions
            .get(last)
            .map_or(range.end, |r| r.end().min(range.end));
        range.start..end
    }

    /// Fills `out` with the pieces of `range` for a vectored write; returns how many.
    pub fn gather<'s>(&'s self, range: Range<usize>, out: &mut [IoSlice<'s>]) -> usize {
        let mut count = 0;
        let range = self.first_regions(range, out.len());
        self.for_each_part(range, |index, local| {
            if count < out.len() {
                out[count] = IoSlice::new(&self.regions[index].bytes()[local]);
                count += 1;
            }
        });
        count
    }

    /// The pieces of `range` for a vectored read, at most [`MAX_IOV`] of them.
    pub fn scatter(&mut self, range: Range<usize>) -> io::Result<Vec<IoSliceMut<'_>>> {
        let range = self.first_regions(range, MAX_IOV);
        let (first, locals) = self.parts(range);
        self.regions[first..]
            .iter_mut()
            .zip(locals)
            .take(MAX_IOV)
            .map(|(region, local)| Ok(IoSliceMut::new(&mut region.bytes_mut()?[local])))
            .collect()
    }

    /// The index of the first region `range` covers, and the region-local range of each
    /// covered region from there on.
    fn parts(&self, range: Range<usize>) -> (usize, Vec<Range<usize>>) {
        let mut locals = Vec::new();
        let first = self.region_at(range.start);
        self.for_each_part(range, |_, local| locals.push(local));
        (first, locals)
    }

    /// Copies `src` into the layout at offset `at`.
    pub fn write(&mut self, at: usize, src: &[u8]) -> io::Result<()> {
        self.for_each_part_mut(at..at + src.len(), |_, bytes, from| {
            bytes.copy_from_slice(&src[from..from + bytes.len()]);
        })
    }

    /// Combines `src` into the layout at `at` with `op`; `at` and `at + src.len()` must be
    /// element boundaries.
    pub fn reduce_from(&mut self, at: usize, src: &[u8], op: ReduceOp) -> io::Result<()> {
        self.for_each_part_mut(at..at + src.len(), |dtype, bytes, from| {
            kernels::reduce_into(dtype, op, bytes, &src[from..from + bytes.len()]);
        })
    }

    /// Applies the end of a reduction (average, postscale) to `range` of `ranks` ranks.
    pub fn finish(
        &mut self,
        range: Range<usize>,
        reduction: Reduction,
        ranks: usize,
    ) -> io::Result<()> {
        self.for_each_part_mut(range, |dtype, bytes, _| {
            kernels::finish(dtype, reduction, ranks, bytes)
        })
    }

    /// Applies the prescale factor to every tensor.
    pub fn prescale(&mut self, reduction: Reduction) -> io::Result<()> {
        let all = 0..self.len;
        self.for_each_part_mut(all, |dtype, bytes, _| {
            kernels::prescale(dtype, reduction, bytes)
        })
    }

    /// Calls `each(dtype, bytes, offset of bytes within range)` for the parts of `range`.
    fn for_each_part_mut(
        &mut self,
        range: Range<usize>,
        mut each: impl FnMut(DType, &mut [u8], usize),
    ) -> io::Result<()> {
        let mut from = 0;
        let (first, locals) = self.parts(range);
        for (region, local) in self.regions[first..].iter_mut().zip(locals) {
            let len = local.len();
            each(region.dtype, &mut region.bytes_mut()?[local], from);
            from += len;
        }
        Ok(())
    }
}

/// Byte ranges of per-rank blocks of `counts` elements of `element` bytes, back to back
/// from `start`: where each rank's part of an allgather, alltoall or reducescatter lies.
pub fn blocks(start: usize, counts: &[usize], element: usize) -> Vec<Range<usize>> {
    let mut at = start;
    counts
        .iter()
        .map(|count| {
            let block = at..at + count * element;
            at = block.end;
            block
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_between_elements_of_each_tensor() {
        let mut a = [0u8; 6]; // 3 x u16 at 0..6
        let mut b = [0u8; 16]; // 2 x f64 at 6..22
        let mut layout = Layout::new();
        layout.push(DType::U16, &mut a);
        layout.push(DType::F64, &mut b);
        assert_eq!(layout.len(), 22);
        let aligned: Vec<usize> = [0, 1, 5, 6, 7, 13, 14, 21, 22]
            .iter()
            .map(|o| layout.align_down(*o))
            .collect();
        assert_eq!(aligned, [0, 0, 4, 6, 6, 6, 14, 14, 22]);
        assert_eq!(layout.split(0..22, 3), vec![0..6, 6..14, 14..22]);
        assert_eq!(layout.split(6..6, 2), vec![6..6, 6..6]);
    }

    #[test]
    fn gather_scatter_and_reduce_span_tensors() {
        let mut a = [1u8, 2, 3];
        let mut b = [4u8, 5];
        let mut layout = Layout::new();
        layout.push(DType::U8, &mut a);
        layout.push(DType::U8, &mut []);
        layout.push(DType::U8, &mut b);
        let mut slices = [IoSlice::new(&[]); 4];
        let n = layout.gather(1..5, &mut slices);
        let gathered: Vec<u8> = slices[..n].iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(gathered, [2, 3, 4, 5]);

        let parts = layout.scatter(2..4).unwrap();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [1, 1]);
        drop(parts);
        layout.reduce_from(1, &[10, 10, 10], ReduceOp::Sum).unwrap();
        layout.write(4, &[9]).unwrap();
        let mut after = [IoSlice::new(&[]); 4];
        let n = layout.gather(0..5, &mut after);
        let all: Vec<u8> = after[..n].iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(all, [1, 12, 13, 14, 9]);
    }

    #[test]
    fn the_shared_input_cannot_be_written() {
        let input = [1u8; 2];
        let mut output = [0u8; 2];
        let mut layout = Layout::new();
        layout.push(DType::U8, &mut output);
        layout.push_shared(DType::U8, &input);
        assert!(layout.write(0, &[7, 7]).is_ok());
        let read_only = "a received frame targets the read-only input of the call";
        assert_eq!(layout.write(1, &[7, 7]).unwrap_err().to_string(), read_only);
        assert_eq!(layout.scatter(2..4).unwrap_err().to_string(), read_only);
    }

    #[test]
    fn blocks_follow_each_other() {
        assert_eq!(blocks(0, &[2, 0, 3], 4), vec![0..8, 8..8, 8..20]);
        assert_eq!(blocks(100, &[1, 1], 2), vec![100..102, 102..104]);
    }
}
