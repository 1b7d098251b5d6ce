//! Broadcast down a tree, chunk by chunk: each rank forwards chunk `j` to its children as
//! soon as it has it, so large messages stream through a chain (root, root + 1, ..) at
//! link speed, and small ones go straight from the root to each rank in small groups, or
//! take a binomial tree's `ceil(log2 n)` hops in larger ones.

use std::io;
use std::ops::Range;

use super::layout::Layout;
use super::{Action, Data, Done, Recv, Schedule};

/// One rank's part of a tree broadcast.
#[derive(Debug)]
pub struct Tree {
    parent: Option<usize>,
    children: Vec<usize>,
    chunks: Vec<Range<usize>>,
    /// Chunks released to each child.
    released: Vec<usize>,
    sends_done: usize,
    receives_released: usize,
    receives_done: usize,
}

impl Tree {
    /// A chain from `root` through every rank in order, in chunks of `chunk_bytes`.
    pub fn chain(
        rank: usize,
        size: usize,
        root: usize,
        layout: &Layout<'_>,
        chunk_bytes: usize,
    ) -> Tree {
        let index = (rank + size - root) % size;
        let rank_of = |index: usize| (index + root) % size;
        let parent = (index > 0).then(|| rank_of(index - 1));
        let children = if index + 1 < size {
            vec![rank_of(index + 1)]
        } else {
            vec![]
        };
        Tree::new(
            parent,
            children,
            layout.frames(0..layout.len(), chunk_bytes),
        )
    }

    /// A binomial tree rooted at `root`, the whole message as one frame.
    pub fn binomial(rank: usize, size: usize, root: usize, layout: &Layout<'_>) -> Tree {
        let index = (rank + size - root) % size;
        let rank_of = |index: usize| (index + root) % size;
        // The parent clears the highest set bit; children set each higher bit, farthest
        // (largest subtree) first.
        let parent = (index > 0).then(|| rank_of(index - (1 << index.ilog2())));
        let lowest_free = if index == 0 { 0 } else { index.ilog2() + 1 };
        let mut children: Vec<usize> = (lowest_free..usize::BITS)
            .map(|bit| 1usize << bit)
            .take_while(|step| index + step < size)
            .map(|step| rank_of(index + step))
            .collect();
        children.reverse();
        Tree::new(parent, children, layout.split(0..layout.len(), 1))
    }

    /// The root sends the message to every other rank itself, in frames of at most
    /// `chunk_bytes`: one hop, and no rank waits for another to be scheduled before it
    /// forwards (see [`choice`](super::choice)).
    pub fn flat(
        rank: usize,
        size: usize,
        root: usize,
        layout: &Layout<'_>,
        chunk_bytes: usize,
    ) -> Tree {
        let (parent, children) = if rank == root {
            (None, (1..size).map(|d| (root + d) % size).collect())
        } else {
            (Some(root), vec![])
        };
        Tree::new(
            parent,
            children,
            layout.frames(0..layout.len(), chunk_bytes),
        )
    }

    fn new(parent: Option<usize>, children: Vec<usize>, chunks: Vec<Range<usize>>) -> Tree {
        Tree {
            parent,
            released: vec![0; children.len()],
            children,
            chunks,
            sends_done: 0,
            receives_released: 0,
            receives_done: 0,
        }
    }

    /// Chunks this rank holds and may forward.
    fn available(&self) -> usize {
        match self.parent {
            Some(_) => self.receives_done,
            None => self.chunks.len(),
        }
    }
}

impl Schedule for Tree {
    fn peers(&self) -> Vec<usize> {
        self.parent.iter().chain(&self.children).copied().collect()
    }

    fn next_send(&mut self, peer: usize) -> Option<Range<usize>> {
        let child = self.children.iter().position(|c| *c == peer)?;
        let next = self.released[child];
        if next >= self.available() {
            return None;
        }
        self.released[child] += 1;
        Some(self.chunks[next].clone())
    }

    fn next_recv(&mut self, peer: usize) -> Option<Recv> {
        if self.parent != Some(peer) || self.receives_released == self.chunks.len() {
            return None;
        }
        self.receives_released += 1;
        Some(Recv::new(
            self.chunks[self.receives_released - 1].clone(),
            Action::Place,
        ))
    }

    fn complete(&mut self, done: Done, _: &mut Data<'_, '_>) -> io::Result<()> {
        match done {
            Done::Sent(_) => self.sends_done += 1,
            Done::Received(_) => self.receives_done += 1,
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        let received = self.parent.is_none() || self.receives_done == self.chunks.len();
        received && self.sends_done == self.children.len() * self.chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tree_from_a_nonzero_root() {
        let layout = Layout::new();
        // Root 2 of 6: indices 0..6 are ranks 2,3,4,5,0,1.
        let root = Tree::binomial(2, 6, 2, &layout);
        assert_eq!((root.parent, root.children.clone()), (None, vec![0, 4, 3]));
        let index_1 = Tree::binomial(3, 6, 2, &layout);
        assert_eq!(
            (index_1.parent, index_1.children.clone()),
            (Some(2), vec![1, 5])
        );
        let index_5 = Tree::binomial(1, 6, 2, &layout);
        assert_eq!((index_5.parent, index_5.children), (Some(3), vec![]));
    }

    #[test]
    fn flat_tree_delivers_the_roots_bytes_to_every_rank() {
        let (size, root) = (5, 3);
        let mut buffers: Vec<Vec<u8>> = (0..size)
            .map(|r| {
                if r == root {
                    (1..=13).collect()
                } else {
                    vec![0; 13]
                }
            })
            .collect();
        let mut layouts = crate::schedule::simulate::byte_layouts(&mut buffers);
        let mut plans: Vec<Box<dyn Schedule>> = (0..size)
            .map(|r| Box::new(Tree::flat(r, size, root, &layouts[r], 4)) as Box<dyn Schedule>)
            .collect();
        let sum = crate::Reduction::new(crate::ReduceOp::Sum);
        crate::schedule::simulate::run(&mut plans, &mut layouts, sum);
        drop(layouts);
        let expected: Vec<u8> = (1..=13).collect();
        for (rank, buffer) in buffers.iter().enumerate() {
            assert_eq!(buffer, &expected, "rank {rank}");
        }
    }

    #[test]
    fn flat_tree_from_a_nonzero_root() {
        let layout = Layout::new();
        let root = Tree::flat(2, 4, 2, &layout, 8);
        assert_eq!((root.parent, root.children.clone()), (None, vec![3, 0, 1]));
        let leaf = Tree::flat(0, 4, 2, &layout, 8);
        assert_eq!((leaf.parent, leaf.children.clone()), (Some(2), vec![]));
        assert_eq!(leaf.peers(), [2]);
    }

    #[test]
    fn chain_forwards_only_what_arrived() {
        let mut bytes = vec![0u8; 32];
        let mut layout = Layout::new();
        layout.push(crate::DType::U8, &mut bytes);
        let mut middle = Tree::chain(1, 3, 0, &layout, 8);
        assert_eq!(middle.peers(), [0, 2]);
        assert_eq!(middle.next_send(2), None);
        assert_eq!(middle.next_recv(0).map(|r| r.range), Some(0..8));
        middle.receives_done = 1;
        assert_eq!(middle.next_send(2), Some(0..8));
        assert_eq!(middle.next_send(2), None);
    }
}
