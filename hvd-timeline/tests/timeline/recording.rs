//! What one rank records: the exact names, rows and args of every kind of event, and
//! recording switched on and off at run time.

use std::sync::Arc;

use hvd_core::reference::LocalGroup;
use hvd_core::trace::{SpanArgs, Tracer};
use hvd_core::{Collective, DType, ReduceOp, Reduction, Tensor, TensorMut};
use hvd_timeline::{Recorder, Timeline, TraceFile, flush};
use serde_json::json;

use crate::common::{Seen, Trace, args, span};

/// A one-rank timeline (stopped) and a file in a fresh directory.
fn one_rank() -> (
    Timeline<hvd_core::reference::LocalCollective>,
    TraceFile,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let file = TraceFile::create(dir.path().join("timeline.json")).unwrap();
    let group = Timeline::new(
        LocalGroup::new(1).build().remove(0),
        Arc::new(Recorder::new()),
    );
    (group, file, dir)
}

fn seen(ph: &str, name: &str) -> Seen {
    Seen {
        ph: ph.into(),
        name: name.into(),
        args: None,
    }
}

#[test]
fn every_operation_is_a_backend_span_on_each_tensors_row_with_its_args() {
    let (group, mut file, _dir) = one_rank();
    group.recorder().start();
    // Six f32 zeros, as bytes, for a view with a 2-D shape.
    let (mut w, mut b) = (vec![0u8; 24], vec![2.0f64; 4]);
    let mut batch = [
        TensorMut::from_bytes("grad/w", DType::F32, vec![2, 3], &mut w).unwrap(),
        TensorMut::from_slice("grad/b", &mut b),
    ];
    group
        .allreduce(&mut batch, Reduction::new(ReduceOp::Sum))
        .unwrap();
    group.broadcast(&mut batch[1..], 0).unwrap();
    let (input, mut output) = ([7i32; 3], [0i32; 3]);
    let gather_in = Tensor::from_slice("gathered", &input);
    let mut gather_out = TensorMut::from_slice("gathered", &mut output);
    group.allgather(&gather_in, &mut gather_out, &[3]).unwrap();
    let mut other_out = [0i32; 3];
    group
        .alltoall(
            &Tensor::from_slice("sent", &input),
            &[3],
            &mut TensorMut::from_slice("received", &mut other_out),
            &[3],
        )
        .unwrap();
    group
        .reducescatter(
            &gather_in,
            &mut TensorMut::from_slice("gathered", &mut other_out),
            &[3],
            Reduction::new(ReduceOp::Max),
        )
        .unwrap();
    group.barrier().unwrap();
    flush(group.recorder(), &group, Some(&mut file)).unwrap();

    let trace = Trace::read(file.path());
    trace.assert_balanced();
    assert_eq!(trace.processes[&0], "rank 0");
    let w_args = args("f32", &[2, 3], 24);
    let b_args = args("f64", &[4], 32);
    let i32x3 = args("i32", &[3], 12);
    assert_eq!(trace.row(0, "grad/w"), span("LOCAL_ALLREDUCE", w_args));
    assert_eq!(
        trace.row(0, "grad/b"),
        [
            span("LOCAL_ALLREDUCE", b_args.clone()),
            span("LOCAL_BROADCAST", b_args)
        ]
        .concat()
    );
    assert_eq!(
        trace.row(0, "gathered"),
        [
            span("LOCAL_ALLGATHER", i32x3.clone()),
            span("LOCAL_REDUCESCATTER", i32x3.clone())
        ]
        .concat()
    );
    // Input and output named apart: the span is on both rows.
    assert_eq!(trace.row(0, "sent"), span("LOCAL_ALLTOALL", i32x3.clone()));
    assert_eq!(trace.row(0, "received"), span("LOCAL_ALLTOALL", i32x3));
    assert_eq!(trace.row(0, "barrier"), span("LOCAL_BARRIER", None));
}

#[test]
fn negotiation_queue_and_cycle_hooks_record_horovods_names() {
    let (group, mut file, _dir) = one_rank();
    let recorder = group.recorder();
    recorder.start();
    recorder.mark_cycle(); // marking is off: nothing
    recorder.set_mark_cycles(true);
    recorder.mark_cycle();
    recorder.negotiate_begin("grad.w1", "allreduce");
    recorder.negotiate_rank_ready("grad.w1", 1);
    recorder.negotiate_begin("grad.w1", "allreduce"); // still negotiating: ignored
    recorder.negotiate_rank_ready("grad.w1", 0);
    recorder.negotiate_end("grad.w1");
    recorder.negotiate_rank_ready("grad.w1", 2); // negotiation over: ignored
    recorder.negotiate_end("grad.w1"); // nothing open: ignored
    recorder.queue_begin("grad.w1");
    recorder.queue_end("grad.w1");
    recorder.negotiate_begin("ids", "Broadcast");
    recorder.negotiate_end("ids");
    recorder.instant("ids", "CUSTOM_MARK");
    flush(recorder, &group, Some(&mut file)).unwrap();

    let trace = Trace::read(file.path());
    trace.assert_balanced();
    assert_eq!(
        trace.row(0, "grad.w1"),
        [
            seen("B", "NEGOTIATE_ALLREDUCE"),
            seen("X", "1"),
            seen("X", "0"),
            seen("E", "NEGOTIATE_ALLREDUCE"),
            seen("B", "QUEUE"),
            seen("E", "QUEUE"),
        ]
    );
    assert_eq!(
        trace.row(0, "ids"),
        [
            seen("B", "NEGOTIATE_BROADCAST"),
            seen("E", "NEGOTIATE_BROADCAST"),
            seen("i", "CUSTOM_MARK"),
        ]
    );
    assert_eq!(trace.row(0, "cycles"), [seen("i", "CYCLE_START")]);
    assert_eq!(
        trace.tid(0, "cycles"),
        Some(0),
        "the cycles row comes first"
    );
    let tick = trace.events.iter().find(|e| e["ph"] == "X").unwrap();
    assert_eq!(tick["dur"], json!(0));
    let mark = trace.events.iter().find(|e| e["ph"] == "i").unwrap();
    assert_eq!(mark["s"], "t");
}

#[test]
fn only_events_while_started_are_recorded_and_rows_stay_balanced() {
    let (group, mut file, _dir) = one_rank();
    let recorder = group.recorder();
    let mut x = [1.0f32; 4];
    let sum = Reduction::new(ReduceOp::Sum);
    let mut allreduce = |name: &str| {
        group
            .allreduce(&mut [TensorMut::from_slice(name, &mut x)], sum)
            .unwrap()
    };

    allreduce("before start");
    assert_eq!(recorder.pending(), 0);
    recorder.start();
    allreduce("while started");
    // A span open when recording stops still ends; an end whose begin was not recorded
    // (recording was off) is dropped.
    recorder.begin("across stop", "WORK", SpanArgs::default());
    recorder.stop();
    recorder.end("across stop", "WORK");
    recorder.queue_begin("queued while stopped");
    recorder.start();
    recorder.queue_end("queued while stopped");
    recorder.stop();
    allreduce("after stop");
    assert!(!recorder.is_started());
    flush(recorder, &group, Some(&mut file)).unwrap();

    let trace = Trace::read(file.path());
    trace.assert_balanced();
    assert_eq!(trace.row(0, "before start"), []);
    assert_eq!(
        trace.row(0, "while started"),
        span("LOCAL_ALLREDUCE", args("f32", &[4], 16))
    );
    assert_eq!(trace.row(0, "across stop"), span("WORK", None));
    assert_eq!(trace.row(0, "queued while stopped"), []);
    assert_eq!(trace.row(0, "after stop"), []);
    assert_eq!(recorder.pending(), 0, "a flush empties the buffer");
}
