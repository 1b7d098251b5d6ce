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
    write_steps(Path::new(&path), u64::MAX);
}

/// Writes the trace of `steps` training steps to `path`, flushing after each.
fn write_steps(path: &Path, steps: u64) {
    let recorder = Arc::new(Recorder::new());
    let group = Timeline::new(LocalGroup::new(1).build().remove(0), recorder.clone());
    let mut file = TraceFile::create(path).unwrap();
    recorder.start();
    let mut data = vec![1.0f32; 64];
    for step in 0..steps {
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

#[test]
fn a_trace_cut_inside_its_last_batch_is_repaired_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("whole.json");
    write_steps(&path, 20);
    let whole = std::fs::read_to_string(&path).unwrap();
    let events = Trace::parse(&whole).events.len();
    // Cut at every byte of the last few lines, as a kill between pages would.
    let last_lines = whole.len() - 600;
    for cut in (last_lines..whole.len() - 3).filter(|&at| whole.is_char_boundary(at)) {
        // Spans of the cut batch may be left open; every complete event is there.
        let repaired = Trace::parse(&repaired(&whole[..cut]));
        let kept = repaired.events.len();
        assert!(
            kept < events && kept + 10 > events,
            "cut at {cut}: {kept} of {events}"
        );
    }
}

/// The repair `TraceFile`'s docs give for a batch cut short: the file up to its last
/// complete line, without the comma that separated it from the next, then `]`.
fn repaired(text: &str) -> String {
    let complete = &text[..text.rfind('\n').unwrap_or(0)];
    format!("{}\n]\n", complete.trim_end().trim_end_matches(','))
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

        // A kill inside a write of more than a page can cut the last batch short (see
        // `TraceFile`); the documented repair then gives back every complete event.
        let text = std::fs::read_to_string(&path).unwrap();
        let trace = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(_) => {
                let trace = Trace::parse(&text);
                trace.assert_balanced();
                trace
            }
            // The cut batch's spans may be left open.
            Err(_) => Trace::parse(&repaired(&text)),
        };
        assert!(trace.of_pid(0).len() > 10, "round {round}");
    }
}
