//! Stall attribution through the runtime: a job where one rank's data is slow names that
//! rank, every rank's four parts add up to its wall time, and the Timeline shows each
//! rank's waits for data.
#![cfg(feature = "data")]

mod common;

use std::time::Duration;

use common::{config, job};
use hvd::{Config, ReduceOp};

const SLOW_RANK: usize = 2;
const STEPS: usize = 6;

#[test]
fn the_rank_whose_data_is_slow_is_charged_with_the_jobs_wait() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let cfg = Config {
        timeline: Some(trace.clone()),
        ..config()
    };
    let reports = job(3, cfg, |hvd| {
        let mut clock = hvd::data_stall::step_clock(&hvd);
        // The exchange of the previous epoch restarts the clock; for the first, a barrier.
        hvd.barrier().unwrap();
        clock.restart();
        for _ in 0..STEPS {
            let wait = if hvd.rank() == SLOW_RANK { 60 } else { 1 };
            clock.data(|| std::thread::sleep(Duration::from_millis(wait)));
            std::thread::sleep(Duration::from_millis(5)); // compute
            let grads = vec![1.0f32; 4096];
            clock
                .comm(|| hvd.allreduce("grads", grads, ReduceOp::Average))
                .unwrap();
            clock.step();
        }
        let report = hvd::data_stall::epoch_report(&hvd, &mut clock).unwrap();
        assert!(
            clock.steps().is_empty(),
            "the report takes the epoch's steps"
        );
        report
    });
    for (rank, report) in reports.iter().enumerate() {
        assert_eq!(report, &reports[0], "rank {rank} attributed differently");
    }
    let report = &reports[0];
    assert_eq!(report.steps, STEPS);
    assert_eq!(report.culprit(), Some(SLOW_RANK), "{report:?}");
    // The slow rank's data wait exceeds the others' by 59 ms a step, and the other ranks
    // spend that time waiting in the allreduce; the bounds leave room for sleeps that
    // overrun on a loaded machine.
    assert!(report.data_lost >= STEPS as f64 * 0.03, "{report:?}");
    let slow_waiting = report.ranks[SLOW_RANK].waiting;
    for (rank, parts) in report.ranks.iter().enumerate() {
        assert!(
            parts.unaccounted().abs() <= 0.01 * parts.wall,
            "rank {rank}'s parts do not add up to its wall time: {parts:?}"
        );
        if rank != SLOW_RANK {
            assert!(
                parts.waiting >= STEPS as f64 * 0.03,
                "rank {rank}: {parts:?}"
            );
            assert!(parts.waiting > slow_waiting, "rank {rank}: {parts:?}");
        }
    }
    let line = report.to_string();
    assert!(
        line.contains(&format!("rank {SLOW_RANK} waited for data")),
        "{line}"
    );

    let text = std::fs::read_to_string(&trace).unwrap();
    let events: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    for rank in 0..3u64 {
        let waits = events
            .iter()
            .filter(|e| e["pid"] == rank && e["name"] == "DATA_WAIT" && e["ph"] == "B")
            .count();
        assert_eq!(waits, STEPS, "rank {rank}'s DATA_WAIT spans");
    }
}

#[test]
fn ranks_that_timed_different_steps_get_an_error_naming_the_rank() {
    let errors = job(2, config(), |hvd| {
        let mut clock = hvd::data_stall::step_clock(&hvd);
        for _ in 0..=hvd.rank() {
            clock.step();
        }
        hvd::data_stall::epoch_report(&hvd, &mut clock)
            .unwrap_err()
            .to_string()
    });
    for error in errors {
        assert!(
            error.contains("rank 1 timed 2 steps and rank 0 1"),
            "{error}"
        );
    }
}
