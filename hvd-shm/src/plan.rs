//! How calls are cut into steps: which bytes of which tensor go through a slot in which
//! step. Pure functions, the same on every rank, so the ranks agree on every step
//! without talking.

use std::ops::Range;

/// Part `index` of `len` items cut into `parts` nearly equal parts (the first
/// `len % parts` parts get one more).
pub(crate) fn share(len: usize, parts: usize, index: usize) -> Range<usize> {
    let (base, extra) = (len / parts, len % parts);
    let start = index * base + index.min(extra);
    start..start + base + usize::from(index < extra)
}

/// The bytes of a block of `len` bytes that step `step` moves when each step moves at
/// most `piece` bytes: empty once the block is done.
pub(crate) fn piece(len: usize, piece: usize, step: usize) -> Range<usize> {
    let start = (step * piece).min(len);
    start..(start + piece).min(len)
}

/// One piece of a window over tensors laid end to end: bytes `tensor_range` of tensor
/// `tensor` are bytes `window_range` of the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) tensor: usize,
    pub(crate) tensor_range: Range<usize>,
    pub(crate) window_range: Range<usize>,
}

/// The pieces of tensors of byte lengths `lens`, laid end to end, that fall in `window`.
pub(crate) fn spans(lens: &[usize], window: Range<usize>) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (tensor, len) in lens.iter().enumerate() {
        let end = start + len;
        let (from, to) = (start.max(window.start), end.min(window.end));
        if from < to {
            spans.push(Span {
                tensor,
                tensor_range: from - start..to - start,
                window_range: from - window.start..to - window.start,
            });
        }
        start = end;
    }
    spans
}

/// How an allreduce moves one group of tensors of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pack {
    /// Consecutive small tensors copied in together, each rank reducing all of them.
    Whole(Range<usize>),
    /// One large tensor, each rank reducing a share of it.
    Split(usize),
}

/// Cuts a batch of tensors of byte lengths `lens` into packs: runs of tensors that
/// together hold at most `small` bytes travel whole, larger tensors split.
pub(crate) fn packs(lens: &[usize], small: usize) -> Vec<Pack> {
    let mut packs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (index, len) in lens.iter().enumerate() {
        if *len > small {
            if start < index {
                packs.push(Pack::Whole(start..index));
            }
            packs.push(Pack::Split(index));
            (start, bytes) = (index + 1, 0);
        } else if bytes + len > small {
            packs.push(Pack::Whole(start..index));
            (start, bytes) = (index, *len);
        } else {
            bytes += len;
        }
    }
    if start < lens.len() {
        packs.push(Pack::Whole(start..lens.len()));
    }
    packs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_everything_once_and_differ_by_at_most_one() {
        for len in 0..40 {
            for parts in 1..9 {
                let shares: Vec<_> = (0..parts).map(|i| share(len, parts, i)).collect();
                assert_eq!(shares[0].start, 0);
                assert_eq!(shares[parts - 1].end, len);
                for pair in shares.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                    assert!(pair[0].len() - pair[1].len() <= 1);
                }
            }
        }
    }

    #[test]
    fn pieces_walk_a_block_and_then_stay_empty() {
        assert_eq!(piece(10, 4, 0), 0..4);
        assert_eq!(piece(10, 4, 2), 8..10);
        assert_eq!(piece(10, 4, 3), 10..10);
        assert_eq!(piece(0, 4, 0), 0..0);
    }

    #[test]
    fn spans_cut_tensors_at_the_window_edges() {
        let got = spans(&[3, 0, 5, 2], 2..7);
        let want = vec![
            Span {
                tensor: 0,
                tensor_range: 2..3,
                window_range: 0..1,
            },
            Span {
                tensor: 2,
                tensor_range: 0..4,
                window_range: 1..5,
            },
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn small_tensors_pack_together_and_large_ones_split() {
        let got = packs(&[10, 20, 100, 5, 30, 30, 0], 50);
        let want = vec![
            Pack::Whole(0..2),
            Pack::Split(2),
            Pack::Whole(3..5),
            Pack::Whole(5..7),
        ];
        assert_eq!(got, want);
        assert_eq!(packs(&[], 50), vec![]);
    }
}
