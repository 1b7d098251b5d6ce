//! Strangers that connect while a group forms are refused, logged at warn with their
//! address, and do not delay the real ranks.

use std::fmt;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, Store, TensorMut};
use hvd_gloo_tcp::{TcpCollective, TcpConfig};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Warnings logged by any thread of this test binary.
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct CaptureWarnings;

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for CaptureWarnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        WARNINGS.lock().unwrap().push(message.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn wait_for_warning(expected: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if WARNINGS.lock().unwrap().iter().any(|w| w == expected) {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "no warning {expected:?}; got {:?}",
        WARNINGS.lock().unwrap()
    );
}

fn published_port(store: &dyn Store) -> u16 {
    let record = store.get("tcp/addr/0", Duration::from_secs(10)).unwrap();
    let text = String::from_utf8(record).unwrap();
    let line = text.lines().find(|l| l.starts_with("port ")).unwrap();
    line["port ".len()..].parse().unwrap()
}

#[test]
fn silent_and_garbage_callers_are_refused_while_the_group_forms() {
    tracing::subscriber::set_global_default(CaptureWarnings).unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let connect = |rank: usize| {
        let store = store.clone();
        thread::spawn(move || TcpCollective::connect(store, rank, 2, TcpConfig::default()))
    };
    let rank0 = connect(0);
    let port = published_port(store.as_ref());

    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut garbage = TcpStream::connect(("127.0.0.1", port)).unwrap();
    garbage
        .write_all(&[b"GET / HTTP/1.1\r\n".as_slice(), &[b'x'; 48]].concat())
        .unwrap();

    let started = Instant::now();
    let rank1 = connect(1);
    let groups = [
        rank0.join().unwrap().unwrap(),
        rank1.join().unwrap().unwrap(),
    ];
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the strays delayed the group by {took:?}"
    );

    let sums: Vec<f64> = thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .map(|group| {
                scope.spawn(move || {
                    let mut x = [2.0f64];
                    group.allreduce(
                        &mut [TensorMut::from_slice("x", &mut x)],
                        Reduction::new(ReduceOp::Sum),
                    )?;
                    Ok::<_, hvd_core::Error>(x[0])
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    assert_eq!(sums, [4.0, 4.0]);

    wait_for_warning(
        &format!(
            "rank 0: refused a connection from {}: not an hvd-tcp peer: it opened with bytes [47, 45, 54, 20, 2f, 20, 48, 54]",
            garbage.local_addr().unwrap()
        ),
        Duration::from_secs(2),
    );
    wait_for_warning(
        &format!(
            "rank 0: refused a connection from {}: it sent no greeting within 5s",
            silent.local_addr().unwrap()
        ),
        Duration::from_secs(8),
    );
    let mut byte = [0u8; 1];
    assert_eq!(
        silent.read(&mut byte).unwrap(),
        0,
        "the silent caller is disconnected"
    );
}
