//! Allreduce in steps. Small tensors travel whole: one step, after which every rank
//! reduces all slots in rank order, so every rank computes the same bits. A large tensor
//! is pipelined in chunks of one slot: each rank reduces its share of a chunk and
//! publishes the result while it copies in the next chunk, so the whole tensor takes
//! one step per chunk plus one; each element is reduced by exactly one rank, which makes
//! the results identical on every rank too.

use hvd_core::{DType, Reduction, Result, kernels};

use crate::copy::copy;
use crate::lockstep::{Desc, Lockstep};
use crate::op::{Call, Op};
use crate::plan::{self, Pack};

/// A host tensor of a batch.
#[derive(Debug)]
pub(crate) struct Part<'a> {
    pub(crate) dtype: DType,
    pub(crate) bytes: &'a mut [u8],
}

/// Reduces every part across the group in place; runs of parts that hold at most
/// `small` bytes together travel whole.
pub(crate) fn allreduce(
    steps: &mut Lockstep,
    tensor: &str,
    parts: &mut [Part<'_>],
    reduction: Reduction,
    small: usize,
) -> Result<()> {
    for part in parts.iter_mut() {
        kernels::prescale(part.dtype, reduction, part.bytes);
    }
    if steps.size() == 1 {
        for part in parts.iter_mut() {
            kernels::finish(part.dtype, reduction, 1, part.bytes);
        }
        return Ok(());
    }
    let lens: Vec<usize> = parts.iter().map(|p| p.bytes.len()).collect();
    for pack in plan::packs(&lens, small.min(steps.slot_bytes())) {
        match pack {
            Pack::Whole(range) => whole(steps, tensor, &mut parts[range], reduction)?,
            Pack::Split(index) => split(steps, tensor, &mut parts[index], reduction)?,
        }
    }
    Ok(())
}

fn whole(
    steps: &mut Lockstep,
    tensor: &str,
    parts: &mut [Part<'_>],
    reduction: Reduction,
) -> Result<()> {
    let call = Call {
        op: Op::AllreduceWhole,
        tensor,
    };
    let slot = steps.slot_mut();
    let mut at = 0;
    for part in parts.iter() {
        copy(&mut slot[at..at + part.bytes.len()], part.bytes);
        at += part.bytes.len();
    }
    steps.sync(&call, Desc::new(call.op, at))?;
    let (rank, size) = (steps.rank(), steps.size());
    let mut at = 0;
    for part in parts.iter_mut() {
        let range = at..at + part.bytes.len();
        if rank != 0 {
            copy(part.bytes, &steps.slot(0)[range.clone()]);
        }
        for peer in 1..size {
            kernels::reduce_into(
                part.dtype,
                reduction.op,
                part.bytes,
                &steps.slot(peer)[range.clone()],
            );
        }
        kernels::finish(part.dtype, reduction, size, part.bytes);
        at = range.end;
    }
    Ok(())
}

/// Chunks of a tensor: chunk `c` holds up to `size` shares of `share` elements, and share
/// `j` of every chunk travels in region `j` of a slot.
struct Chunks {
    elements: usize,
    element: usize,
    share: usize,
    size: usize,
}

impl Chunks {
    fn count(&self) -> usize {
        self.elements.div_ceil(self.share * self.size)
    }

    /// Byte range in the tensor of share `j` of chunk `c`.
    fn share(&self, c: usize, j: usize) -> std::ops::Range<usize> {
        let start = c * self.share * self.size;
        let len = (self.elements - start).min(self.share * self.size);
        let own = plan::share(len, self.size, j);
        (start + own.start) * self.element..(start + own.end) * self.element
    }

    /// Byte range in a slot of region `j` holding `len` bytes.
    fn region(&self, j: usize, len: usize) -> std::ops::Range<usize> {
        let start = j * self.share * self.element;
        start..start + len
    }
}

fn split(
    steps: &mut Lockstep,
    tensor: &str,
    part: &mut Part<'_>,
    reduction: Reduction,
) -> Result<()> {
    let call = Call {
        op: Op::AllreduceSplit,
        tensor,
    };
    let (rank, size, dtype) = (steps.rank(), steps.size(), part.dtype);
    let chunks = Chunks {
        elements: part.bytes.len() / dtype.size(),
        element: dtype.size(),
        share: steps.region_bytes() / dtype.size(),
        size,
    };
    let data = &mut *part.bytes;
    let count = chunks.count();
    // Step s copies in chunk s and publishes this rank's result of chunk s - 1.
    for s in 0..=count {
        let slot = steps.slot_mut();
        if s > 0 {
            let mine = chunks.share(s - 1, rank);
            copy(&mut slot[chunks.region(rank, mine.len())], &data[mine]);
        }
        if s < count {
            for j in (0..size).filter(|j| *j != rank) {
                let theirs = chunks.share(s, j);
                copy(&mut slot[chunks.region(j, theirs.len())], &data[theirs]);
            }
        }
        steps.sync(&call, Desc::new(call.op, data.len()))?;
        if s < count {
            let mine = chunks.share(s, rank);
            let region = chunks.region(rank, mine.len());
            let acc = &mut data[mine];
            for peer in (0..size).filter(|p| *p != rank) {
                kernels::reduce_into(dtype, reduction.op, acc, &steps.slot(peer)[region.clone()]);
            }
            kernels::finish(dtype, reduction, size, acc);
        }
        if s > 0 {
            for j in (0..size).filter(|j| *j != rank) {
                let theirs = chunks.share(s - 1, j);
                let region = chunks.region(j, theirs.len());
                copy(&mut data[theirs], &steps.slot(j)[region]);
            }
        }
    }
    Ok(())
}
