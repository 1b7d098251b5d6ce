//! Several ranks, one file: every rank a process, every tensor one row id across ranks.

use hvd_core::{Collective, ReduceOp, Reduction, Tensor, TensorMut};
use hvd_timeline::{TraceFile, align_clocks, flush};

use crate::common::{Seen, Trace, args, on_ranks, span};

#[test]
fn three_ranks_flush_into_one_file_with_a_process_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeline.json");
    let size = 3;
    on_ranks(size, |rank, group| {
        let recorder = group.recorder().clone();
        let mut file = (rank == 0).then(|| TraceFile::create(&path).unwrap());
        recorder.set_clock_offset(align_clocks(&group, 5).unwrap().local());
        recorder.set_mark_cycles(true);

        recorder.mark_cycle();
        recorder.negotiate_begin("grad.w", "allreduce");
        for ready in 0..size {
            recorder.negotiate_rank_ready("grad.w", ready);
        }
        recorder.negotiate_end("grad.w");
        // Ranks name their second tensor differently: rows are per name, job-wide.
        let own = format!("only.rank{rank}");
        let (mut w, mut b) = ([1.0f32; 8], [rank as i64; 2]);
        group
            .allreduce(
                &mut [
                    TensorMut::from_slice("grad.w", &mut w),
                    TensorMut::from_slice(&own, &mut b),
                ],
                Reduction::new(ReduceOp::Sum),
            )
            .unwrap();
        flush(&recorder, &group, file.as_mut()).unwrap();
        if let Some(file) = &file {
            Trace::read(file.path()).assert_balanced();
        }

        let mine = [rank as u16; 2];
        let mut all = [0u16; 6];
        group
            .allgather(
                &Tensor::from_slice("grad.w", &mine),
                &mut TensorMut::from_slice("grad.w", &mut all),
                &[2; 3],
            )
            .unwrap();
        flush(&recorder, &group, file.as_mut()).unwrap();
    });

    let trace = Trace::read(&path);
    trace.assert_balanced();
    let tick = |name: &str| Seen {
        ph: "X".into(),
        name: name.into(),
        args: None,
    };
    let tid = trace.tid(0, "grad.w").unwrap();
    for pid in 0..size as u64 {
        assert_eq!(trace.processes[&pid], format!("rank {pid}"));
        assert_eq!(trace.tid(pid, "grad.w"), Some(tid), "one row id per tensor");
        let negotiate = span("NEGOTIATE_ALLREDUCE", None);
        let expected = [
            vec![negotiate[0].clone(), tick("0"), tick("1"), tick("2")],
            vec![negotiate[1].clone()],
            span("LOCAL_ALLREDUCE", args("f32", &[8], 32)).to_vec(),
            span("LOCAL_ALLGATHER", args("u16", &[2], 4)).to_vec(),
        ]
        .concat();
        assert_eq!(trace.row(pid, "grad.w"), expected, "rank {pid}");
        assert_eq!(
            trace.row(pid, &format!("only.rank{pid}")),
            span("LOCAL_ALLREDUCE", args("i64", &[2], 16))
        );
        assert_eq!(trace.row(pid, "cycles").len(), 1);
        let label = trace
            .events
            .iter()
            .find(|e| e["name"] == "process_labels" && e["pid"] == pid)
            .unwrap_or_else(|| panic!("rank {pid} has no clock label"));
        let label = label["args"]["labels"].as_str().unwrap();
        assert!(label.starts_with("clock offset from rank 0: "), "{label}");
    }
    // Each rank's own tensor appears on its own process only.
    assert_eq!(trace.row(1, "only.rank2"), []);
}
