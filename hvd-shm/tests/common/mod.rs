//! What the tests share: a config per job, and the check that a job left nothing in
//! `/dev/shm`.

// Each test binary compiles this module and uses its own part of it.
#![allow(dead_code)]

use hvd_shm::ShmConfig;

/// A config whose segments carry `job` in their names, so a test can find its own.
pub fn config(job: &str) -> ShmConfig {
    let mut config = ShmConfig::default();
    config.job_id = job.into();
    config
}

/// Files in `/dev/shm` left by segments of `job`.
pub fn leftovers(job: &str) -> Vec<String> {
    let prefix = format!("hvd-shm-{job}-");
    std::fs::read_dir("/dev/shm")
        .map(|dir| {
            dir.filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Fails the test when `job` left a segment behind.
pub fn assert_no_leftovers(job: &str) {
    let left = leftovers(job);
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}
