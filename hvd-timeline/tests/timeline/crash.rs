//! A process killed while it writes the timeline leaves a file that parses.
//!
//! The test re-runs its own binary as a child that records and flushes in a loop until
//! it is killed with SIGKILL (no destructor, no flush, no closing bracket written at exit).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd_core::reference::LocalGroup;
use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
use hvd_timeline::{Recorder, Timeline, TraceFile, flush};

use crate::common::Trace;

/// Where the child writes; set only in the child.
const CHILD_PATH: &str = "HVD_TIMELINE_TEST_CHILD_PATH";

/// The child, run by the test below in a process of its own.
#[test]
#[ignore = "run in a child process by the crash test"]
fn crash_child() {
    let path = std::env::var_os(CHILD_PATH).expect("run by the crash test, which sets the path");
    let recorder = Arc::new(Recorder::new());
    let group = Timeline::new(LocalGroup::new(1).build().remove(0), recorder.clone());
    let mut file = TraceFile::create(path).unwrap();
    recorder.start();
    let mut data = vec![1.0f32; 64];
    for step in 0u64.. {
        // Vary the batch size so that the kill lands at different points of a write.
        for t in 0..1 + step % 7 {
            let name = format!("layer{t}/grad \"step\" ✓");
            recorder.queue_begin(&name);
            recorder.queue_end(&name);
            group
                .allreduce(
                    &mut [TensorMut::from_slice(&name, &mut data)],
                    Reduction::new(ReduceOp::Average),
                )
                .unwrap();
        }
        flush(&recorder, &group, Some(&mut file)).unwrap();
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[cfg(unix)]
#[test]
fn a_writer_killed_mid_run_leaves_a_parseable_file() {
    let dir = tempfile::tempdir().unwrap();
    for (round, grow_to) in [4_000u64, 60_000, 250_000].into_iter().enumerate() {
        let path = dir.path().join(format!("killed{round}.json"));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["crash::crash_child", "--exact", "--ignored", "--quiet"])
            .env(CHILD_PATH, &path)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while size(&path) < grow_to && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "the child ran to completion instead of looping"
        );
        assert!(
            size(&path) >= grow_to,
            "the child wrote only {} bytes",
            size(&path)
        );

        let trace = Trace::read(&path);
        trace.assert_balanced();
        assert!(trace.of_pid(0).len() > 10, "round {round}");
    }
}
