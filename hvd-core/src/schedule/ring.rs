//! The ring: reduce-scatter, allgather, and allreduce as the one followed by the other.
//!
//! The buffer is cut into one segment per rank. In reduce-scatter step `s` every rank sends
//! segment `rank - s - 1` to its right neighbour and combines segment `rank - s - 2` from
//! its left one into its own copy, so after `n - 1` steps rank `r` holds the finished
//! segment `r`. Allgather steps then pass finished segments around the ring, segment
//! `rank - t` going out at step `t`. Every rank sends and receives `(n - 1) / n` of the
//! buffer per phase, the bandwidth-optimal amount.
//!
//! Segments are cut into `k` chunks, and chunk `j` of step `s + 1` leaves as soon as chunk
//! `j` of step `s` has arrived, so the steps overlap like a pipeline: with frames numbered
//! `i = s * k + j` in both directions, frame `i` may be sent once frame `i - k` has been
//! received and combined. Receives reduce into the result as bytes arrive.

use std::io;
use std::ops::Range;

use super::layout::Layout;
use super::{Action, Data, Done, Recv, Schedule};

/// One rank's part of a ring pass.
#[derive(Debug)]
pub struct Ring {
    rank: usize,
    size: usize,
    left: usize,
    right: usize,
    /// `chunks[segment][j]`: chunk `j` of each segment.
    chunks: Vec<Vec<Range<usize>>>,
    /// Chunks per segment.
    k: usize,
    /// Reduce-scatter steps, then allgather steps.
    reduce_steps: usize,
    gather_steps: usize,
    sends_released: usize,
    sends_done: usize,
    receives_released: usize,
    receives_done: usize,
}

impl Ring {
    /// Reduce-scatter then allgather over the whole layout, cut evenly.
    pub fn allreduce(rank: usize, size: usize, layout: &Layout<'_>, chunk_bytes: usize) -> Ring {
        let segments = layout.split(0..layout.len(), size);
        Ring::new(rank, size, &segments, layout, chunk_bytes, true, true)
    }

    /// Reduce-scatter that leaves `segments[rank]` finished on each rank.
    pub fn reduce_scatter(
        rank: usize,
        size: usize,
        segments: &[Range<usize>],
        layout: &Layout<'_>,
        chunk_bytes: usize,
    ) -> Ring {
        Ring::new(rank, size, segments, layout, chunk_bytes, true, false)
    }

    /// Allgather of `segments[r]`, which rank `r` already holds.
    pub fn allgather(
        rank: usize,
        size: usize,
        segments: &[Range<usize>],
        layout: &Layout<'_>,
        chunk_bytes: usize,
    ) -> Ring {
        Ring::new(rank, size, segments, layout, chunk_bytes, false, true)
    }

    fn new(
        rank: usize,
        size: usize,
        segments: &[Range<usize>],
        layout: &Layout<'_>,
        chunk_bytes: usize,
        reduce: bool,
        gather: bool,
    ) -> Ring {
        let longest = segments
            .iter()
            .map(ExactSizeIterator::len)
            .max()
            .unwrap_or(0);
        let k = longest.div_ceil(chunk_bytes.max(1)).max(1);
        let steps = size - 1;
        Ring {
            rank,
            size,
            left: (rank + size - 1) % size,
            right: (rank + 1) % size,
            chunks: segments
                .iter()
                .map(|s| layout.split(s.clone(), k))
                .collect(),
            k,
            reduce_steps: if reduce { steps } else { 0 },
            gather_steps: if gather { steps } else { 0 },
            sends_released: 0,
            sends_done: 0,
            receives_released: 0,
            receives_done: 0,
        }
    }

    fn frames(&self) -> usize {
        (self.reduce_steps + self.gather_steps) * self.k
    }

    /// The segment this rank sends at `step`; it receives the one before it.
    fn sent_segment(&self, step: usize) -> usize {
        let back = match step.checked_sub(self.reduce_steps) {
            Some(gather_step) => gather_step,
            None => step + 1,
        };
        (self.rank + self.size * 2 - back % self.size) % self.size
    }

    fn chunk(&self, segment: usize, frame: usize) -> Range<usize> {
        self.chunks[segment][frame % self.k].clone()
    }
}

impl Schedule for Ring {
    fn peers(&self) -> Vec<usize> {
        match self.size {
            1 => vec![],
            2 => vec![self.right],
            _ => vec![self.right, self.left],
        }
    }

    fn next_send(&mut self, peer: usize) -> Option<Range<usize>> {
        let frame = self.sends_released;
        // Frame i carries what frame i - k brought in (and this rank combined).
        let ready = frame < self.k || self.receives_done > frame - self.k;
        if peer != self.right || frame == self.frames() || !ready {
            return None;
        }
        self.sends_released += 1;
        Some(self.chunk(self.sent_segment(frame / self.k), frame))
    }

    fn next_recv(&mut self, peer: usize) -> Option<Recv> {
        let frame = self.receives_released;
        if peer != self.left || frame == self.frames() {
            return None;
        }
        self.receives_released += 1;
        let step = frame / self.k;
        let segment = (self.sent_segment(step) + self.size - 1) % self.size;
        let action = if step + 1 < self.reduce_steps {
            Action::Reduce
        } else if step < self.reduce_steps {
            Action::ReduceFinish
        } else {
            Action::Place
        };
        Some(Recv::new(self.chunk(segment, frame), action))
    }

    fn complete(&mut self, done: Done, _: &mut Data<'_, '_>) -> io::Result<()> {
        match done {
            Done::Sent(_) => self.sends_done += 1,
            Done::Received(_) => self.receives_done += 1,
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.sends_done == self.frames() && self.receives_done == self.frames()
    }
}

#[cfg(test)]
mod tests {
    use crate::DType;

    use super::*;

    /// (segment sent, segment received and its action) at each step, chunk 0.
    fn plan(ring: &mut Ring) -> Vec<(usize, usize, Action)> {
        let mut steps = Vec::new();
        for _ in 0..ring.frames() {
            let sent = ring.next_send(ring.right).unwrap();
            let recv = ring.next_recv(ring.left).unwrap();
            let segment_of =
                |r: &Range<usize>| ring.chunks.iter().position(|c| c.contains(r)).unwrap();
            steps.push((segment_of(&sent), segment_of(&recv.range), recv.action));
            ring.receives_done += 1;
        }
        steps
    }

    #[test]
    fn allreduce_steps_end_with_each_rank_owning_its_segment() {
        let mut bytes = vec![0u8; 16];
        let mut layout = Layout::new();
        layout.push(DType::F32, &mut bytes);
        let mut ring = Ring::allreduce(1, 4, &layout, 1 << 20);
        use Action::*;
        assert_eq!(
            plan(&mut ring),
            [
                (0, 3, Reduce),
                (3, 2, Reduce),
                (2, 1, ReduceFinish),
                (1, 0, Place),
                (0, 3, Place),
                (3, 2, Place)
            ]
        );
    }

    #[test]
    fn a_send_waits_for_the_chunk_it_forwards() {
        let mut bytes = vec![0u8; 64];
        let mut layout = Layout::new();
        layout.push(DType::U8, &mut bytes);
        let mut ring = Ring::allreduce(0, 2, &layout, 8);
        assert_eq!(ring.k, 4);
        for _ in 0..4 {
            assert!(ring.next_send(1).is_some());
        }
        assert_eq!(ring.next_send(1), None, "step 1 needs step 0's chunks");
        ring.receives_done = 1;
        assert!(ring.next_send(1).is_some());
        assert_eq!(ring.next_send(1), None);
    }

    #[test]
    fn one_rank_has_nothing_to_do() {
        let layout = Layout::new();
        let ring = Ring::allreduce(0, 1, &layout, 8);
        assert!(ring.is_done() && ring.peers().is_empty());
    }
}
