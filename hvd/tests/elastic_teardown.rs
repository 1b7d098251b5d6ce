//! What an elastic job needs of the runtime when a round fails: the error is one it
//! recovers from, and dropping the runtime never waits on the lost peer.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd::core::MemoryStore;
use hvd::{Backend, Builder, ReduceOp, World};

/// Rank `rank` of `size` over TCP, meeting in `store`.
fn tcp_rank(store: &Arc<MemoryStore>, rank: usize, size: usize) -> hvd::Hvd {
    let world = World {
        rank,
        size,
        launcher: "test",
        store: store.clone(),
        local_size: None,
    };
    Builder::new()
        .world(world)
        .backend(Backend::Tcp)
        .config(common::config())
        .build()
        .unwrap()
}

#[test]
fn survivors_of_a_lost_peer_recover_and_drop_their_runtime_at_once() {
    let store = Arc::new(MemoryStore::new());
    let outcomes: Vec<Option<(String, bool, Duration)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|rank| {
                let store = store.clone();
                s.spawn(move || {
                    let hvd = tcp_rank(&store, rank, 3);
                    hvd.allreduce("warmup", vec![1.0f32], ReduceOp::Sum)
                        .unwrap();
                    if rank == 2 {
                        // Leaves without a word, as a dying host's rank would.
                        drop(hvd);
                        return None;
                    }
                    let err = loop {
                        if let Err(e) = hvd.allreduce("grad", vec![1.0f32; 1 << 16], ReduceOp::Sum)
                        {
                            break e;
                        }
                    };
                    let started = Instant::now();
                    drop(hvd);
                    Some((err.to_string(), err.is_recoverable(), started.elapsed()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (rank, outcome) in outcomes.into_iter().enumerate().take(2) {
        let (error, recoverable, dropped_in) = outcome.unwrap();
        assert!(error.contains("rank 2"), "rank {rank}: {error}");
        assert!(recoverable, "rank {rank}: {error}");
        assert!(
            dropped_in < Duration::from_millis(500),
            "rank {rank} took {dropped_in:?} to drop its runtime"
        );
    }
}
