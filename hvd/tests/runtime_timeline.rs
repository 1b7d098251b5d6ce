//! The Timeline through the runtime: one trace for the whole job, valid JSON, every rank
//! a process row, Horovod's event names.

mod common;

use common::{config, job};
use hvd::{Config, ReduceOp};
use serde_json::Value;

fn events(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn names(events: &[Value], pid: u64) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["pid"] == pid && e["ph"] != "M")
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect()
}

#[test]
fn a_job_writes_one_trace_with_every_rank_and_horovods_event_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    let cfg = Config {
        timeline: Some(path.clone()),
        timeline_mark_cycles: true,
        ..config()
    };
    job(2, cfg, |hvd| {
        for step in 0..3 {
            let tensors = (0..3)
                .map(|i| (format!("grad.{i}"), vec![step as f32; 64]))
                .collect();
            hvd.grouped_allreduce(tensors, ReduceOp::Sum).unwrap();
        }
        hvd.broadcast("weights", vec![1u8; 8], 0).unwrap();
    });
    let events = events(&path);
    for rank in 0..2u64 {
        let names = names(&events, rank);
        for expected in [
            "NEGOTIATE_ALLREDUCE",
            "QUEUE",
            "LOCAL_ALLREDUCE",
            "MEMCPY_IN_FUSION_BUFFER",
            "MEMCPY_OUT_FUSION_BUFFER",
            "NEGOTIATE_BROADCAST",
            "LOCAL_BROADCAST",
            "CYCLE_START",
        ] {
            assert!(
                names.iter().any(|n| n == expected),
                "rank {rank} lacks {expected}: {names:?}"
            );
        }
        let process_name = events
            .iter()
            .find(|e| e["ph"] == "M" && e["pid"] == rank && e["name"] == "process_name");
        assert_eq!(
            process_name.unwrap()["args"]["name"],
            format!("rank {rank}")
        );
    }
    let allreduce = events
        .iter()
        .find(|e| e["name"] == "LOCAL_ALLREDUCE" && e["ph"] == "B")
        .unwrap();
    assert_eq!(allreduce["args"]["dtype"], "f32");
}

#[test]
fn the_timeline_can_start_and_stop_while_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("later.json");
    job(2, config(), |hvd| {
        hvd.allreduce("before", vec![1i32], ReduceOp::Sum).unwrap();
        hvd.start_timeline(&path).unwrap();
        hvd.allreduce("during", vec![1i32], ReduceOp::Sum).unwrap();
        hvd.barrier().unwrap();
        hvd.stop_timeline();
        hvd.allreduce("after", vec![1i32], ReduceOp::Sum).unwrap();
    });
    let events = events(&path);
    let rows: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(rows.contains(&"during"), "{rows:?}");
    assert!(
        !rows.contains(&"before") && !rows.contains(&"after"),
        "{rows:?}"
    );
}

/// Once `stop_timeline` returns on every rank, rank 0's file holds everything recorded,
/// as a whole JSON array, while the job goes on: a program can read it at once, as after
/// Horovod's `stop_timeline`.
#[test]
fn the_file_is_complete_when_stop_timeline_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stopped.json");
    job(2, config(), |hvd| {
        hvd.start_timeline(&path).unwrap();
        hvd.allreduce("recorded", vec![1i32], ReduceOp::Sum)
            .unwrap();
        hvd.stop_timeline();
        if hvd.rank() == 0 {
            let rows: Vec<String> = events(&path)
                .iter()
                .filter(|e| e["name"] == "thread_name")
                .filter_map(|e| e["args"]["name"].as_str().map(String::from))
                .collect();
            assert!(rows.iter().any(|r| r == "recorded"), "{rows:?}");
        }
        hvd.barrier().unwrap();
    });
}

/// Steps whose data rides the negotiation round show it on the tensor's row: a span per
/// round this rank was ready for (5 of 8 steps ride; a round some other rank was not
/// ready for shows too), every one closed.
#[test]
fn a_small_repeated_allreduce_shows_the_round_that_carried_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ride.json");
    let cfg = Config {
        timeline: Some(path.clone()),
        ..config()
    };
    job(2, cfg, |hvd| {
        for step in 0..8 {
            let out = hvd
                .allreduce("loss", vec![step as f32], ReduceOp::Sum)
                .unwrap();
            assert_eq!(out, vec![2.0 * step as f32]);
        }
        assert_eq!(hvd.stats().speculated, 5);
    });
    let events = events(&path);
    for rank in 0..2u64 {
        let count = |phase: &str| {
            events
                .iter()
                .filter(|e| e["pid"] == rank && e["name"] == "ALLREDUCE_IN_NEGOTIATION")
                .filter(|e| e["ph"] == phase)
                .count()
        };
        assert!(count("B") >= 5, "rank {rank}: {} spans", count("B"));
        assert_eq!(count("B"), count("E"), "rank {rank}");
    }
}
