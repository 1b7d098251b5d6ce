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

#[test]
fn process_sets_follow_the_tuned_fusion_threshold_in_step() {
    let cfg = Config {
        autotune: true,
        ..config()
    };
    let results = job(2, cfg, |hvd| {
        let set = hvd.add_process_set(&[0, 1]).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for step in 0..200 {
            let tensors = (0..4)
                .map(|i| (format!("grad.{i}"), vec![step as f32; 1024]))
                .collect();
            hvd.grouped_allreduce(tensors, ReduceOp::Sum).unwrap();
            // Batches on the set keep matching while its threshold changes under them.
            let tensors = (0..4)
                .map(|i| (format!("set.{i}"), vec![step as f32; 1024]))
                .collect();
            let out = set.grouped_allreduce(tensors, ReduceOp::Sum).unwrap();
            assert!(
                out.iter()
                    .all(|t| t.iter().all(|v| *v == 2.0 * step as f32))
            );
            seen.insert(set.stats().fusion_threshold);
        }
        hvd.barrier().unwrap();
        // The set takes the job's last change within a few of its own cycles.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while set.stats().fusion_threshold != hvd.stats().fusion_threshold
            && std::time::Instant::now() < deadline
        {
            set.barrier().unwrap();
        }
        (
            hvd.stats().fusion_threshold,
            set.stats().fusion_threshold,
            seen.len(),
        )
    });
    for (rank, (job_threshold, set_threshold, distinct)) in results.iter().enumerate() {
        assert_eq!(job_threshold, set_threshold, "rank {rank}: {results:?}");
        assert!(*distinct >= 2, "the set followed changes: {results:?}");
    }
}
