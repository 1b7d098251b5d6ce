//! The stall inspector's warning names the tensor, who submitted it and who did not.
//! (Its own test binary: it installs the process-wide log subscriber.)

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{config, job};
use hvd::{Config, ReduceOp};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_stall_is_reported_with_the_missing_ranks_before_anything_fails() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .init();
    let cfg = Config {
        stall_check: Some(Duration::from_millis(100)),
        stall_shutdown: Some(Duration::from_secs(30)),
        ..config()
    };
    job(3, cfg, |hvd| {
        if hvd.rank() == 1 {
            // Late, but not too late: after the check time, before the shutdown time.
            std::thread::sleep(Duration::from_millis(600));
        }
        hvd.allreduce("grad.w1", vec![1.0f32], ReduceOp::Sum)
            .unwrap()
    });
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("tensor 'grad.w1' was submitted by rank(s) 0, 2 but not yet by rank(s) 1"),
        "{text}"
    );
    assert_eq!(text.matches("WARN").count(), 1, "warned once: {text}");
}
