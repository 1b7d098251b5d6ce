//! The file: valid JSON after every flush, names escaped, clear errors.

use std::sync::Arc;

use hvd_core::reference::LocalGroup;
use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
use hvd_timeline::{Recorder, Timeline, TraceFile, flush};

use crate::common::{Trace, args, on_ranks, span};

#[test]
fn the_file_parses_after_every_flush_from_creation_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeline.json");
    let mut file = TraceFile::create(&path).unwrap();
    assert!(
        Trace::read(&path).events.is_empty(),
        "an empty array at first"
    );
    let recorder = Arc::new(Recorder::new());
    let group = Timeline::new(LocalGroup::new(1).build().remove(0), recorder.clone());

    flush(&recorder, &group, Some(&mut file)).unwrap();
    // A flush with nothing recorded still names the rank.
    let first = Trace::read(&path);
    assert_eq!(first.processes[&0], "rank 0");
    assert_eq!(first.of_pid(0).len(), 0);

    recorder.start();
    let mut data = [1u8; 3];
    for step in 0..5 {
        let name = format!("step{step}");
        group
            .allreduce(
                &mut [TensorMut::from_slice(&name, &mut data)],
                Reduction::new(ReduceOp::Max),
            )
            .unwrap();
        flush(&recorder, &group, Some(&mut file)).unwrap();
        let trace = Trace::read(&path);
        trace.assert_balanced();
        // One span per step: the flushes' own collectives through the timeline are not
        // recorded.
        assert_eq!(trace.of_pid(0).len(), 2 * (step + 1));
        assert_eq!(
            trace.row(0, &name),
            span("LOCAL_ALLREDUCE", args("u8", &[3], 3))
        );
    }
    // Metadata is written once per rank and row, not once per flush.
    let names = Trace::read(&path)
        .events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .count();
    assert_eq!(names, 1);
}

#[test]
fn tensor_names_are_escaped_and_come_back_exactly() {
    let names = [
        "quote\"back\\slash",
        "new\nline\ttab\u{1}",
        "grüße/参数/🙂",
        "",
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut file = TraceFile::create(dir.path().join("t.json")).unwrap();
    let recorder = Arc::new(Recorder::new());
    let group = Timeline::new(LocalGroup::new(1).build().remove(0), recorder.clone());
    recorder.start();
    for name in names {
        recorder.queue_begin(name);
        recorder.queue_end(name);
    }
    flush(&recorder, &group, Some(&mut file)).unwrap();
    let trace = Trace::read(file.path());
    trace.assert_balanced();
    for name in names {
        assert_eq!(trace.row(0, name), span("QUEUE", None), "row {name:?}");
    }
}

#[test]
fn a_file_that_cannot_be_created_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-dir").join("timeline.json");
    let err = TraceFile::create(&path).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("creating the timeline file {}: ", path.display())),
        "{text}"
    );
}

#[test]
fn only_rank_0_may_hold_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let results = on_ranks(2, |rank, group| {
        let mut file = TraceFile::create(dir.path().join(format!("rank{rank}.json"))).unwrap();
        flush(group.recorder(), &group, Some(&mut file)).map_err(|e| e.to_string())
    });
    assert_eq!(results[0], Ok(()));
    let expected = format!(
        "rank 1: invalid timeline flush of tensor '{}': only rank 0 writes the timeline file; other ranks pass None",
        dir.path().join("rank1.json").display()
    );
    assert_eq!(results[1], Err(expected));
}
