//! How the runtime hands a cycle's tensors to the transport: as batches capped by the
//! fusion threshold, or one by one when fusion is off.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hvd::core::Operation;
use hvd::core::layer::Layer;
use hvd::core::reference::{LocalCollective, LocalGroup};
use hvd::{Collective, Config, ReduceOp, Result};

/// The reference transport, recording the number of tensors of every data allreduce
/// (the runtime's own negotiation traffic, named `hvd.*`, is left out).
struct Recording {
    inner: LocalCollective,
    batches: Arc<Mutex<Vec<usize>>>,
}

impl Layer for Recording {
    type Inner = LocalCollective;
    fn inner(&self) -> &LocalCollective {
        &self.inner
    }
    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        if let Operation::Allreduce { tensors, .. } = &op
            && !tensors[0].name().starts_with("hvd.")
        {
            self.batches.lock().unwrap().push(tensors.len());
        }
        op.run(&self.inner)
    }
    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        this.inner.split(members)
    }
    fn backend(_: &Self) -> &'static str {
        "recording"
    }
    fn fuses_batches(_: &Self) -> bool {
        // Batches reach the transport as they are, so the test sees what the engine made.
        true
    }
}

/// Submits 40 tensors of 1 KiB on each of 2 ranks as fast as it can and returns the sizes
/// of rank 0's data allreduces: what was queued when a cycle ran is batched.
fn batches_with_threshold(fusion_threshold: usize) -> Vec<usize> {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let group = LocalGroup::new(2).timeout(Duration::from_secs(30)).build();
    let config = Config {
        fusion_threshold,
        ..common::config()
    };
    std::thread::scope(|s| {
        for (rank, inner) in group.into_iter().enumerate() {
            let record = if rank == 0 {
                batches.clone()
            } else {
                Arc::new(Mutex::new(Vec::new()))
            };
            let config = config.clone();
            s.spawn(move || {
                let hvd = hvd::Builder::new()
                    .collective(Recording {
                        inner,
                        batches: record,
                    })
                    .config(config)
                    .build()
                    .unwrap();
                let tensors = (0..40)
                    .map(|i| (format!("t{i}"), vec![1.0f32; 256]))
                    .collect();
                let out = hvd.grouped_allreduce(tensors, ReduceOp::Sum).unwrap();
                assert!(out.iter().all(|t| t.iter().all(|v| *v == 2.0)));
            });
        }
    });
    let batches = batches.lock().unwrap().clone();
    assert_eq!(batches.iter().sum::<usize>(), 40, "{batches:?}");
    batches
}

#[test]
fn with_fusion_off_every_tensor_is_its_own_collective() {
    assert_eq!(batches_with_threshold(0), vec![1; 40]);
}

#[test]
fn batches_never_exceed_the_fusion_threshold() {
    // 1 KiB tensors, 4 KiB threshold: at most 4 per collective.
    let batches = batches_with_threshold(4096);
    assert!(batches.iter().all(|b| *b <= 4), "{batches:?}");
    assert!(
        batches.iter().any(|b| *b > 1),
        "some batching happens: {batches:?}"
    );
}

#[test]
fn with_a_large_threshold_a_burst_travels_in_few_collectives() {
    let batches = batches_with_threshold(128 << 20);
    assert!(batches.len() < 40, "{batches:?}");
}
