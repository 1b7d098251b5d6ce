//! Adasum: Horovod's scale-invariant alternative to summing gradients, as an algorithm
//! over any [`Collective`].
//!
//! Adasum is not element-wise, so it is no [`ReduceOp`] that transports
//! implement: it combines whole vectors two at a time ([`pairwise`]), recursively over the
//! ranks, and needs only two things from a transport, an exchange with one peer
//! ([`Collective::alltoall`] with every other count zero) and a small sum
//! ([`Collective::allreduce`]). So it runs on every transport, and the conformance suite
//! proves it there.
//!
//! The recursion halves the vectors as it doubles the distance (Horovod's scheme): at
//! level `d` (1, 2, 4, ...) each rank pairs with `rank ^ d`; the lower of the two keeps
//! the first half of its current segment of every tensor and sends the second, the upper
//! the reverse; each combines its kept half of the lower group's vector (`a`) with the
//! upper group's (`b`). The coefficients need dot products over the whole vectors, whose
//! parts are spread over the `2d` ranks of the block, so the partial sums are added up
//! across it (one allreduce per level for the whole batch). Then the segments travel back
//! the same way, and every rank holds
//! `adasum(adasum(v0, v1), adasum(v2, v3))` (for four ranks), per tensor.

pub mod pairwise;

use std::ops::Range;

use crate::{Collective, DType, Device, Error, ReduceOp, Reduction, Result, Tensor, TensorMut};

pub use pairwise::{Dots, Floating, pair};

/// Replaces every tensor of the batch with the Adasum of the ranks' tensors, in place.
/// Each tensor is combined on its own (its own dot products); every rank calls it with
/// the same batch. Tensors must be in host memory and of a floating-point dtype, and the
/// group's size a power of two.
pub fn allreduce(group: &dyn Collective, tensors: &mut [TensorMut<'_>]) -> Result<()> {
    let (rank, size) = (group.topology().rank(), group.topology().size());
    for t in tensors.iter() {
        check(rank, t.name(), t.dtype(), t.device(), size)?;
    }
    let name = crate::batch_name(tensors);
    let mut run = Recursion {
        group,
        rank,
        name,
        // Every tensor passed the checks above.
        tensors: tensors.iter_mut().filter_map(Part::new).collect(),
    };
    let mut levels = Vec::new();
    let mut distance = 1;
    while distance < size {
        levels.push(run.reduce_level(distance)?);
        distance *= 2;
    }
    while let Some(previous) = levels.pop() {
        distance /= 2;
        run.gather_level(distance, previous)?;
    }
    Ok(())
}

/// Checks that Adasum can combine a tensor of `dtype` in `device` memory over a group of
/// `size` ranks; the error names the tensor and what is wrong.
pub fn check(rank: usize, tensor: &str, dtype: DType, device: Device, size: usize) -> Result<()> {
    let invalid = |reason: String| Err(Error::invalid(rank, "adasum", tensor, reason));
    if Floating::new(dtype).is_none() {
        return invalid(format!(
            "Adasum combines floating-point tensors (f16, bf16, f32, f64), not {dtype}"
        ));
    }
    if device != Device::Cpu {
        return invalid(format!(
            "Adasum runs on host memory; this tensor is on {device}"
        ));
    }
    if !size.is_power_of_two() {
        return invalid(format!(
            "Adasum needs a power-of-two number of ranks; this group has {size}"
        ));
    }
    Ok(())
}

/// One tensor as the recursion sees it: its bytes and the segment this rank works on.
struct Part<'t> {
    kind: Floating,
    bytes: &'t mut [u8],
    /// Elements of the tensor this rank holds the combination of, so far.
    segment: Range<usize>,
}

impl<'t> Part<'t> {
    /// `tensor`, if it is one Adasum combines: floating-point, in host memory.
    fn new(tensor: &'t mut TensorMut<'_>) -> Option<Part<'t>> {
        let (kind, len) = (Floating::new(tensor.dtype())?, tensor.len());
        Some(Part {
            kind,
            bytes: tensor.host_mut()?,
            segment: 0..len,
        })
    }

    fn width(&self) -> usize {
        self.kind.dtype().size()
    }

    fn byte_range(&self, elements: &Range<usize>) -> Range<usize> {
        let width = self.width();
        elements.start * width..elements.end * width
    }

    fn bytes_of(&self, elements: &Range<usize>) -> &[u8] {
        &self.bytes[self.byte_range(elements)]
    }
}

struct Recursion<'g, 't> {
    group: &'g dyn Collective,
    rank: usize,
    /// The batch's name, for errors and traces.
    name: String,
    tensors: Vec<Part<'t>>,
}

/// `segment` split in two: the part the lower rank of a pair keeps, and the upper's.
fn halves(segment: &Range<usize>) -> (Range<usize>, Range<usize>) {
    let mid = segment.start + segment.len() / 2;
    (segment.start..mid, mid..segment.end)
}

impl Recursion<'_, '_> {
    /// Sends `send` to `peer` and receives `recv.len()` bytes from it.
    fn exchange(&self, peer: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
        let size = self.group.topology().size();
        let mut send_counts = vec![0; size];
        let mut recv_counts = vec![0; size];
        send_counts[peer] = send.len();
        recv_counts[peer] = recv.len();
        let input = Tensor::from_bytes(&self.name, DType::U8, vec![send.len()], send)?;
        let mut output = TensorMut::from_bytes(&self.name, DType::U8, vec![recv.len()], recv)?;
        self.group
            .alltoall(&input, &send_counts, &mut output, &recv_counts)
    }

    /// One level of the halving: exchanges halves with `rank ^ distance` and combines the
    /// kept half. Returns the segments as they were before, for the way back.
    fn reduce_level(&mut self, distance: usize) -> Result<Vec<Range<usize>>> {
        let peer = self.rank ^ distance;
        let lower = self.rank & distance == 0;
        let before: Vec<Range<usize>> = self.tensors.iter().map(|t| t.segment.clone()).collect();
        let mut send = Vec::new();
        let mut kept = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            let (first, second) = halves(&t.segment);
            let (keep, give) = if lower {
                (first, second)
            } else {
                (second, first)
            };
            send.extend_from_slice(t.bytes_of(&give));
            kept.push(keep);
        }
        let widths: Vec<usize> = self
            .tensors
            .iter()
            .zip(&kept)
            .map(|(t, k)| k.len() * t.width())
            .collect();
        let mut received = vec![0u8; widths.iter().sum()];
        self.exchange(peer, &send, &mut received)?;

        // Partial dot products of the kept halves, summed over the block of 2 * distance
        // ranks that together hold the whole of both vectors.
        let n = self.tensors.len();
        let block = self.rank / (2 * distance);
        let blocks = self.group.topology().size() / (2 * distance);
        let mut sums = vec![0f64; blocks * n * 3];
        let mut at = 0;
        for (i, (t, keep)) in self.tensors.iter().zip(&kept).enumerate() {
            let mine = t.bytes_of(keep);
            let theirs = &received[at..at + widths[i]];
            at += widths[i];
            let (a, b) = if lower {
                (mine, theirs)
            } else {
                (theirs, mine)
            };
            let dots = pairwise::dots(t.kind, a, b);
            let slot = (block * n + i) * 3;
            sums[slot..slot + 3].copy_from_slice(&[dots.ab, dots.aa, dots.bb]);
        }
        let dots_name = format!("{}.adasum_dots", self.name);
        self.group.allreduce(
            &mut [TensorMut::from_slice(&dots_name, &mut sums)],
            Reduction::new(ReduceOp::Sum),
        )?;

        let mut at = 0;
        for (i, (t, keep)) in self.tensors.iter_mut().zip(kept).enumerate() {
            let slot = (block * n + i) * 3;
            let dots = Dots {
                ab: sums[slot],
                aa: sums[slot + 1],
                bb: sums[slot + 2],
            };
            let (ca, cb) = dots.coefficients();
            let (own, other) = if lower { (ca, cb) } else { (cb, ca) };
            let range = t.byte_range(&keep);
            let theirs = &received[at..at + widths[i]];
            at += widths[i];
            pairwise::combine_into(t.kind, &mut t.bytes[range], own, theirs, other);
            t.segment = keep;
        }
        Ok(before)
    }

    /// Undoes one level: swaps the combined halves with `rank ^ distance`, so both hold
    /// the combination over the segment they had before it.
    fn gather_level(&mut self, distance: usize, previous: Vec<Range<usize>>) -> Result<()> {
        let peer = self.rank ^ distance;
        let lower = self.rank & distance == 0;
        let mut send = Vec::new();
        let mut missing = Vec::with_capacity(self.tensors.len());
        for (t, whole) in self.tensors.iter().zip(&previous) {
            send.extend_from_slice(t.bytes_of(&t.segment));
            let (first, second) = halves(whole);
            missing.push(if lower { second } else { first });
        }
        let widths: Vec<usize> = self
            .tensors
            .iter()
            .zip(&missing)
            .map(|(t, m)| m.len() * t.width())
            .collect();
        let mut received = vec![0u8; widths.iter().sum()];
        self.exchange(peer, &send, &mut received)?;
        let mut at = 0;
        for ((t, other), (whole, width)) in self
            .tensors
            .iter_mut()
            .zip(missing)
            .zip(previous.into_iter().zip(widths))
        {
            let range = t.byte_range(&other);
            t.bytes[range].copy_from_slice(&received[at..at + width]);
            at += width;
            t.segment = whole;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
