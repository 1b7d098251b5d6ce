//! Autotuning inside the runtime: rank 0 decides, every rank applies the same parameters,
//! results stay right, and the log records every point tried.

mod common;

use common::{config, job};
use hvd::{Config, ReduceOp};

#[test]
fn every_rank_applies_rank_0s_decisions_and_the_log_lists_the_points() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("autotune.csv");
    let cfg = Config {
        autotune: true,
        autotune_log: Some(log.clone()),
        ..config()
    };
    let results = job(2, cfg, |hvd| {
        let mut changes = 0;
        let mut last = hvd.stats();
        for step in 0..200 {
            let tensors = (0..4)
                .map(|i| (format!("grad.{i}"), vec![step as f32; 1024]))
                .collect();
            let out = hvd.grouped_allreduce(tensors, ReduceOp::Sum).unwrap();
            assert!(
                out.iter()
                    .all(|t| t.iter().all(|v| *v == 2.0 * step as f32))
            );
            let now = hvd.stats();
            changes += usize::from(
                (now.fusion_threshold, now.cycle_time_us)
                    != (last.fusion_threshold, last.cycle_time_us),
            );
            last = now;
        }
        hvd.barrier().unwrap();
        (
            hvd.stats().fusion_threshold,
            hvd.stats().cycle_time_us,
            changes,
        )
    });
    assert_eq!(
        results[0].0, results[1].0,
        "same fusion threshold everywhere"
    );
    assert_eq!(results[0].1, results[1].1, "same cycle time everywhere");
    assert!(
        results[0].2 >= 2,
        "the tuner moved through several points: {results:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("sample,fusion_threshold_bytes,cycle_time_ms,score_bytes_per_sec,best")
    );
    let rows: Vec<&str> = lines.collect();
    assert!(rows.len() >= 2, "{text}");
    assert!(
        rows.iter().filter(|r| r.ends_with(",1")).count() <= 1,
        "{text}"
    );
}
