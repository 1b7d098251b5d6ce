//! `Timeline` over the reference transport passes the public conformance suite while
//! recording, and what it recorded renders as a balanced trace.

use std::sync::Arc;

use hvd_core::conformance::{self, Options};
use hvd_core::reference::LocalGroup;
use hvd_timeline::{Recorder, Timeline, TraceFile, flush};

use crate::common::{Trace, on_ranks};

fn run(size: usize) {
    let recorders: Vec<Arc<Recorder>> = (0..size).map(|_| Arc::new(Recorder::new())).collect();
    let group = LocalGroup::new(size)
        .build()
        .into_iter()
        .zip(&recorders)
        .map(|(rank, recorder)| {
            recorder.start();
            Timeline::new(rank, recorder.clone())
        })
        .collect();
    if let Err(failure) = conformance::run_group(group, &Options::quick()) {
        panic!("{size} ranks: {failure}");
    }

    // Flush what the suite recorded over a fresh group (not recording itself).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeline.json");
    on_ranks(size, |rank, group| {
        group.recorder().stop();
        let recorder = &recorders[rank];
        assert!(recorder.pending() > 0, "rank {rank} recorded nothing");
        let mut file = (rank == 0).then(|| TraceFile::create(&path).unwrap());
        flush(recorder, &group, file.as_mut()).unwrap();
    });
    let trace = Trace::read(&path);
    trace.assert_balanced();
    for pid in 0..size as u64 {
        assert!(
            trace
                .of_pid(pid)
                .iter()
                .any(|e| e["name"] == "LOCAL_ALLREDUCE"),
            "rank {pid} has no allreduce span"
        );
    }
}

#[test]
fn conformance_1_rank() {
    run(1);
}

#[test]
fn conformance_2_ranks() {
    run(2);
}

#[test]
fn conformance_3_ranks() {
    run(3);
}
