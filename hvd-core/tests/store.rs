//! Every `Store` passes the same checks: each behaviour is written once below and run
//! against `MemoryStore` and `FileStore` (modules `memory` and `file`). Checks that only
//! make sense for a directory, including the multi-process one, come after.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use hvd_core::{FileStore, MemoryStore, PrefixStore, Store};
use tempfile::TempDir;

/// Long enough never to be reached by a passing test.
const WAIT: Duration = Duration::from_secs(10);

/// A store under test, with the temporary directory it lives in when it has one.
struct Subject {
    store: Arc<dyn Store>,
    /// The store is the `store` subdirectory of this root, so that a file written outside
    /// the store's directory shows up in the root.
    root: Option<TempDir>,
}

impl Subject {
    fn memory() -> Self {
        Subject {
            store: Arc::new(MemoryStore::new()),
            root: None,
        }
    }

    fn file() -> Self {
        let root = tempfile::tempdir().expect("temporary directory");
        let store = FileStore::new(root.path().join("store")).expect("open file store");
        Subject {
            store: Arc::new(store),
            root: Some(root),
        }
    }

    fn dir(&self) -> Option<PathBuf> {
        self.root.as_ref().map(|root| root.path().join("store"))
    }

    /// Another handle on the same store, as another rank would open it: for a directory
    /// that is a second `FileStore` on the same path.
    fn handle(&self) -> Arc<dyn Store> {
        match self.dir() {
            None => Arc::clone(&self.store),
            Some(dir) => Arc::new(FileStore::new(dir).expect("reopen file store")),
        }
    }
}

macro_rules! store_checks {
    ($($check:ident),* $(,)?) => {
        mod memory {
            $(#[test] fn $check() { super::$check(&super::Subject::memory()) })*
        }
        mod file {
            $(#[test] fn $check() { super::$check(&super::Subject::file()) })*
        }
    };
}

store_checks!(
    binary_values_round_trip,
    set_replaces_a_longer_value,
    try_get_of_a_missing_key_is_none,
    get_waits_for_a_later_set,
    get_timeout_names_the_key,
    get_accepts_an_unbounded_timeout,
    add_is_atomic_across_threads,
    add_counts_from_zero_in_decimal_text,
    add_on_a_non_counter_names_the_key,
    delete_reports_whether_the_key_was_there,
    tricky_keys_round_trip_inside_the_store,
    prefixes_isolate_their_keys,
    readers_never_see_a_partial_value,
);

fn binary_values_round_trip(s: &Subject) {
    let mebibyte: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let values: [&[u8]; 4] = [
        b"",
        b"\0\xff\n\r\0",
        &(0..=255).collect::<Vec<u8>>(),
        &mebibyte,
    ];
    for (i, value) in values.iter().enumerate() {
        let key = format!("value{i}");
        s.store.set(&key, value).expect("set");
        assert_eq!(s.store.get(&key, WAIT).expect("get"), *value, "{key}");
        assert_eq!(
            s.handle().try_get(&key).expect("try_get").as_deref(),
            Some(*value)
        );
    }
}

fn set_replaces_a_longer_value(s: &Subject) {
    s.store.set("k", b"a long first value").expect("set");
    s.store.set("k", b"short").expect("set again");
    assert_eq!(s.store.get("k", WAIT).expect("get"), b"short");
}

fn try_get_of_a_missing_key_is_none(s: &Subject) {
    assert_eq!(s.store.try_get("missing").expect("try_get"), None);
}

fn get_waits_for_a_later_set(s: &Subject) {
    let other = s.handle();
    let setter = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        other.set("late", b"here").expect("set");
    });
    assert_eq!(s.store.get("late", WAIT).expect("get"), b"here");
    setter.join().expect("setter thread");
}

fn get_timeout_names_the_key(s: &Subject) {
    let started = Instant::now();
    let err = s
        .store
        .get("never", Duration::from_millis(50))
        .expect_err("nobody sets 'never'");
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(
        err.to_string(),
        "store: timed out after 50ms waiting for key 'never': no rank has set it"
    );
}

/// `Duration::MAX` reads as "wait forever"; it must not overflow the deadline.
fn get_accepts_an_unbounded_timeout(s: &Subject) {
    s.store.set("k", b"v").expect("set");
    assert_eq!(s.store.get("k", Duration::MAX).expect("get"), b"v");
}

/// Every increment returns a distinct new value, so the values seen are exactly 1..=800.
fn add_is_atomic_across_threads(s: &Subject) {
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let store = s.handle();
            thread::spawn(move || {
                (0..100)
                    .map(|_| store.add("counter", 1).expect("add"))
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut seen: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("adding thread"))
        .collect();
    seen.sort_unstable();
    let expected: Vec<i64> = (1..=800).collect();
    if seen != expected {
        seen.dedup();
        panic!(
            "lost increments: {} distinct results of 800 adds",
            seen.len()
        );
    }
    assert_eq!(s.store.get("counter", WAIT).expect("get"), b"800");
}

fn add_counts_from_zero_in_decimal_text(s: &Subject) {
    assert_eq!(s.store.add("c", 5).expect("add"), 5);
    assert_eq!(s.store.add("c", -7).expect("add"), -2);
    assert_eq!(
        s.store.try_get("c").expect("try_get").as_deref(),
        Some(&b"-2"[..])
    );
    s.store.set("set", b"41").expect("set");
    assert_eq!(s.store.add("set", 1).expect("add"), 42);
}

fn add_on_a_non_counter_names_the_key(s: &Subject) {
    s.store.set("name", b"hello").expect("set");
    let err = s.store.add("name", 1).expect_err("not a counter");
    assert_eq!(
        err.to_string(),
        r#"store: key 'name' holds "hello", which is not a counter"#
    );
    assert_eq!(s.store.get("name", WAIT).expect("get"), b"hello");
}

fn delete_reports_whether_the_key_was_there(s: &Subject) {
    s.store.set("k", b"v").expect("set");
    assert!(s.store.delete("k").expect("delete"));
    assert_eq!(s.store.try_get("k").expect("try_get"), None);
    assert!(!s.store.delete("k").expect("delete again"));
}

/// Keys that look like paths, differ only in case, or look like escapes stay distinct,
/// and a directory store writes every one of them as a plain file directly inside it.
fn tricky_keys_round_trip_inside_the_store(s: &Subject) {
    let keys = [
        "a/b",
        "a",
        "A",
        "..",
        ".",
        "",
        "../../etc/passwd",
        "/abs",
        "a\\b",
        "with space",
        "ünï",
        "%2F",
        "con",
        ".lock",
        ".tmp-1-0-0",
    ];
    for (i, key) in keys.iter().enumerate() {
        s.store.set(key, i.to_string().as_bytes()).expect(key);
    }
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            s.store.get(key, WAIT).expect(key),
            i.to_string().as_bytes(),
            "{key:?}"
        );
    }
    if let (Some(root), Some(dir)) = (&s.root, s.dir()) {
        let in_root: Vec<_> = fs::read_dir(root.path()).expect("list root").collect();
        assert_eq!(in_root.len(), 1, "only the store directory: {in_root:?}");
        let files = fs::read_dir(&dir)
            .expect("list store")
            .map(|entry| entry.expect("entry").file_type().expect("file type"))
            .filter(|kind| kind.is_file())
            .count();
        let entries = fs::read_dir(&dir).expect("list store").count();
        assert_eq!(files, entries, "only plain files in {}", dir.display());
        assert!(files >= keys.len(), "one file per key in {}", dir.display());
    }
    for key in keys {
        assert!(s.store.delete(key).expect(key), "{key:?}");
    }
}

fn prefixes_isolate_their_keys(s: &Subject) {
    let one = PrefixStore::new(s.handle(), "job1");
    let two = PrefixStore::new(s.handle(), "job2");
    one.set("addr", b"1").expect("set");
    assert_eq!(two.try_get("addr").expect("try_get"), None);
    two.set("addr", b"2").expect("set");
    assert_eq!(one.add("n", 1).expect("add"), 1);
    assert_eq!(two.add("n", 5).expect("add"), 5);
    assert!(one.delete("addr").expect("delete"));
    assert_eq!(two.get("addr", WAIT).expect("get"), b"2");
    assert_eq!(
        s.store.try_get("job2/addr").expect("inner").as_deref(),
        Some(&b"2"[..])
    );
}

fn readers_never_see_a_partial_value(s: &Subject) {
    const LEN: usize = 64 << 10;
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, done) = (s.handle(), Arc::clone(&done));
        thread::spawn(move || {
            for i in 0..200 {
                let byte = if i % 2 == 0 { 0xAA } else { 0x55 };
                store.set("v", &[byte; LEN]).expect("set");
            }
            done.store(true, Ordering::Release);
        })
    };
    while !done.load(Ordering::Acquire) {
        if let Some(value) = s.store.try_get("v").expect("try_get") {
            assert_eq!(value.len(), LEN);
            assert!(value.iter().all(|&b| b == value[0]), "a torn value");
        }
    }
    writer.join().expect("writer thread");
}

#[test]
fn file_store_creation_error_names_the_path() {
    let root = tempfile::tempdir().expect("temporary directory");
    let plain = root.path().join("plain");
    fs::write(&plain, b"not a directory").expect("write file");
    let dir = plain.join("store");
    let err = FileStore::new(&dir).expect_err("a file is in the way");
    let text = err.to_string();
    let expected = format!("creating store directory {}: ", dir.display());
    assert!(text.starts_with(&expected), "{text}");
    assert!(text.len() > expected.len(), "the OS error follows: {text}");
}

/// A writer that crashed between writing its temporary file and renaming it leaves a
/// stray file; readers go on seeing the last complete value.
#[test]
fn file_store_ignores_stray_temporary_files() {
    let root = tempfile::tempdir().expect("temporary directory");
    let store = FileStore::new(root.path()).expect("open file store");
    store.set("k", b"complete").expect("set");
    for stray in [".tmp-999-0000000000000000-0", "k-k.partial", "junk"] {
        fs::write(root.path().join(stray), b"parti").expect("write stray file");
    }
    assert_eq!(store.get("k", WAIT).expect("get"), b"complete");
    assert_eq!(store.add("n", 3).expect("add"), 3);
    assert_eq!(store.try_get("junk").expect("try_get"), None);
}

/// Names the directory a child process of the test below adds in; set only in children.
const CHILD_DIR: &str = "HVD_STORE_TEST_CHILD_DIR";
const CHILDREN: usize = 4;
const ADDS_PER_CHILD: i64 = 50;

/// Child processes that are killed if the test ends, or fails, before they do.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // Already exited is fine; nothing else can be done about a failure here.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The test binary runs itself again, filtered to this test, as each child process.
#[test]
fn file_store_add_is_atomic_across_processes() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        let store = FileStore::new(PathBuf::from(dir)).expect("child opens store");
        for _ in 0..ADDS_PER_CHILD {
            store.add("counter", 1).expect("child adds");
        }
        return;
    }
    let root = tempfile::tempdir().expect("temporary directory");
    let store = FileStore::new(root.path()).expect("open file store");
    let exe = std::env::current_exe().expect("path of the test binary");
    let test = "file_store_add_is_atomic_across_processes";
    let mut children = Children(
        (0..CHILDREN)
            .map(|_| {
                Command::new(&exe)
                    .args(["--exact", test, "--nocapture", "--test-threads=1"])
                    .env(CHILD_DIR, root.path())
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("spawn child")
            })
            .collect(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, child) in children.0.iter_mut().enumerate() {
        let status = loop {
            if let Some(status) = child.try_wait().expect("poll child") {
                break status;
            }
            assert!(Instant::now() < deadline, "child {i} ran over 30 s");
            thread::sleep(Duration::from_millis(5));
        };
        assert!(status.success(), "child {i} failed: {status}");
    }
    let total = CHILDREN as i64 * ADDS_PER_CHILD;
    assert_eq!(store.add("counter", 0).expect("add"), total);
}
