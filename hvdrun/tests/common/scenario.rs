//! Jobs of a test binary's own ranks: a test launches its ignored test `rank_body` as the
//! ranks of a [`Job`] with a scenario (`HVD_TEST_SCENARIO`) and a folder
//! (`HVD_TEST_OUT`), and each rank writes what it saw to its report there, which the test
//! then reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hvdrun::{Job, JobOutcome};

/// Runs `rank_body` as `np` ranks with `scenario` and `vars` set for every rank; returns
/// how the job ended and each rank's report (None for a rank that wrote none).
pub fn launch(
    np: usize,
    scenario: &str,
    vars: &[(&str, &str)],
) -> (JobOutcome, Vec<Option<String>>) {
    let out = tempfile::tempdir().unwrap();
    let args = [
        "rank_body",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ];
    let mut job = Job::new(
        std::env::current_exe().unwrap(),
        args.map(String::from).to_vec(),
        np,
    )
    .env("HVD_TEST_SCENARIO", scenario)
    .env("HVD_TEST_OUT", out.path().to_str().unwrap())
    // A frozen rank ignores SIGTERM until it is killed.
    .grace(Duration::from_millis(200))
    .quiet();
    for (name, value) in vars {
        job = job.env(*name, *value);
    }
    let outcome = job.run().unwrap();
    let reports = (0..np)
        .map(|r| std::fs::read_to_string(report_path(out.path(), r)).ok())
        .collect();
    (outcome, reports)
}

/// In a rank: the scenario it runs and the folder its report goes to.
pub fn rank_scenario() -> (String, PathBuf) {
    let scenario = std::env::var("HVD_TEST_SCENARIO").unwrap();
    let out = PathBuf::from(std::env::var("HVD_TEST_OUT").unwrap());
    (scenario, out)
}

/// Where rank `rank` writes its report.
pub fn report_path(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank{rank}.txt"))
}
