//! Tests' engine: runs one schedule per rank over in-memory layouts, moving each
//! released frame to the peer that expects it and applying its action there, as the
//! transports' engines do over the wire.

use std::io::IoSlice;
use std::ops::Range;

use crate::Reduction;

use super::{Action, Data, Done, Layout, MAX_IOV, Schedule};

/// One layout of one `u8` tensor per buffer.
pub(crate) fn byte_layouts(buffers: &mut [Vec<u8>]) -> Vec<Layout<'_>> {
    buffers
        .iter_mut()
        .map(|b| {
            let mut layout = Layout::new();
            layout.push(crate::DType::U8, b);
            layout
        })
        .collect()
}

/// The bytes of `range` of `layout`.
fn read(layout: &Layout<'_>, range: Range<usize>) -> Vec<u8> {
    let mut slices = [IoSlice::new(&[]); MAX_IOV];
    let count = layout.gather(range, &mut slices);
    slices[..count]
        .iter()
        .flat_map(|s| s.iter().copied())
        .collect()
}

/// Runs `plans[r]` over `layouts[r]` for every rank `r` until all are done; panics when a
/// frame's length differs from what its receiver expects, or when no frame can move.
pub(crate) fn run(
    plans: &mut [Box<dyn Schedule>],
    layouts: &mut [Layout<'_>],
    reduction: Reduction,
) {
    let size = plans.len();
    // stashes[receiver][sender]: the last stashed payload.
    let mut stashes = vec![vec![Vec::new(); size]; size];
    let mut pending: Vec<Option<Range<usize>>> = vec![None; size * size];
    while !plans.iter().all(|p| p.is_done()) {
        let mut moved = false;
        for from in 0..size {
            for to in 0..size {
                let slot = &mut pending[from * size + to];
                if slot.is_none() {
                    *slot = plans[from].next_send(to);
                }
                let Some(range) = slot.clone() else { continue };
                let Some(recv) = plans[to].next_recv(from) else {
                    continue;
                };
                assert_eq!(recv.range.len(), range.len(), "frame {from} -> {to}");
                let payload = read(&layouts[from], range);
                let (at, target) = (recv.range.start, &mut layouts[to]);
                match recv.action {
                    Action::Place => target.write(at, &payload).unwrap(),
                    Action::Reduce => target.reduce_from(at, &payload, reduction.op).unwrap(),
                    Action::ReduceFinish => {
                        target.reduce_from(at, &payload, reduction.op).unwrap();
                        target.finish(recv.range, reduction, size).unwrap();
                    }
                    Action::Stash => stashes[to][from] = payload,
                }
                pending[from * size + to] = None;
                for (rank, done) in [(from, Done::Sent(to)), (to, Done::Received(from))] {
                    let mut data = Data {
                        layout: &mut layouts[rank],
                        stashes: &stashes[rank],
                    };
                    plans[rank].complete(done, &mut data).unwrap();
                }
                moved = true;
            }
        }
        assert!(moved, "the schedules deadlocked");
    }
}
