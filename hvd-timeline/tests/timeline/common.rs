//! Helpers the integration tests share: ranks as threads, and a parsed trace.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use hvd_core::reference::{LocalCollective, LocalGroup};
use hvd_timeline::{Recorder, Timeline};
use serde_json::Value;

/// Runs `f(rank, timeline)` on `size` ranks as threads, each with its own started recorder,
/// and returns the results in rank order.
pub fn on_ranks<T: Send>(
    size: usize,
    f: impl Fn(usize, Timeline<LocalCollective>) -> T + Sync,
) -> Vec<T> {
    let group = LocalGroup::new(size).build();
    std::thread::scope(|scope| {
        let handles: Vec<_> = group
            .into_iter()
            .enumerate()
            .map(|(rank, collective)| {
                let f = &f;
                scope.spawn(move || {
                    let recorder = Arc::new(Recorder::new());
                    recorder.start();
                    f(rank, Timeline::new(collective, recorder))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread panicked"))
            .collect()
    })
}

/// A trace file, parsed, with its metadata indexed.
#[derive(Debug)]
pub struct Trace {
    pub events: Vec<Value>,
    /// `thread_name` per (pid, tid).
    pub threads: HashMap<(u64, u64), String>,
    /// `process_name` per pid.
    pub processes: HashMap<u64, String>,
}

/// One non-metadata event, flattened for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub ph: String,
    pub name: String,
    pub args: Option<Value>,
}

impl Trace {
    /// Parses the file; panics with its text when it is not a JSON array.
    pub fn read(path: &Path) -> Trace {
        let text = std::fs::read_to_string(path).expect("read the trace");
        Trace::parse(&text)
    }

    pub fn parse(text: &str) -> Trace {
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => panic!("the trace is not valid JSON ({e}):\n{text}"),
        };
        let events = value.as_array().expect("a JSON array").clone();
        let mut threads = HashMap::new();
        let mut processes = HashMap::new();
        for e in &events {
            if e["ph"] != "M" {
                continue;
            }
            let pid = e["pid"].as_u64().expect("pid");
            let name = e["args"]["name"].as_str().map(str::to_owned);
            match (e["name"].as_str(), name) {
                (Some("thread_name"), Some(name)) => {
                    threads.insert((pid, e["tid"].as_u64().expect("tid")), name);
                }
                (Some("process_name"), Some(name)) => {
                    processes.insert(pid, name);
                }
                _ => {}
            }
        }
        Trace {
            events,
            threads,
            processes,
        }
    }

    /// The `tid` of `row` in process `pid`.
    pub fn tid(&self, pid: u64, row: &str) -> Option<u64> {
        self.threads
            .iter()
            .find(|((p, _), name)| *p == pid && name.as_str() == row)
            .map(|((_, tid), _)| *tid)
    }

    /// The events on `row` of process `pid`, in file order (which is time order per row).
    pub fn row(&self, pid: u64, row: &str) -> Vec<Seen> {
        let Some(tid) = self.tid(pid, row) else {
            return Vec::new();
        };
        self.events
            .iter()
            .filter(|e| e["ph"] != "M" && e["pid"] == pid && e["tid"] == tid)
            .map(|e| Seen {
                ph: e["ph"].as_str().expect("ph").to_owned(),
                name: e["name"].as_str().expect("name").to_owned(),
                args: e.get("args").cloned(),
            })
            .collect()
    }

    /// Every non-metadata event of process `pid`.
    pub fn of_pid(&self, pid: u64) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["ph"] != "M" && e["pid"] == pid)
            .collect()
    }

    /// Asserts that `B` and `E` events nest properly on every (pid, tid) row, each `E`
    /// closing the innermost open `B` of the same name, nothing left open, timestamps not
    /// going backwards within a row; and that every event's row is named.
    pub fn assert_balanced(&self) {
        let mut open: HashMap<(u64, u64), Vec<(String, f64)>> = HashMap::new();
        for e in &self.events {
            let ph = e["ph"].as_str().expect("ph");
            if ph == "M" {
                continue;
            }
            let key = (
                e["pid"].as_u64().expect("pid"),
                e["tid"].as_u64().expect("tid"),
            );
            assert!(self.threads.contains_key(&key), "row {key:?} has no name");
            let (name, ts) = (
                e["name"].as_str().expect("name"),
                e["ts"].as_f64().expect("ts"),
            );
            let stack = open.entry(key).or_default();
            match ph {
                "B" => stack.push((name.to_owned(), ts)),
                "E" => {
                    let (begun, at) = stack.pop().unwrap_or_else(|| panic!("E without B: {e}"));
                    assert_eq!(begun, name, "E closes another span on row {key:?}");
                    assert!(ts >= at, "span {name} on {key:?} ends before it begins");
                }
                _ => {}
            }
        }
        for (row, stack) in open {
            assert!(stack.is_empty(), "row {row:?} left open: {stack:?}");
        }
    }
}

/// A span's `args` as the trace shows them.
pub fn args(dtype: &str, shape: &[usize], bytes: usize) -> Option<Value> {
    Some(serde_json::json!({ "dtype": dtype, "shape": shape, "bytes": bytes }))
}

/// `B name args`, `E name`.
pub fn span(name: &str, args: Option<Value>) -> [Seen; 2] {
    [
        Seen {
            ph: "B".into(),
            name: name.into(),
            args,
        },
        Seen {
            ph: "E".into(),
            name: name.into(),
            args: None,
        },
    ]
}
