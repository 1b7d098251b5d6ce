//! A machine without libfabric: every entry point returns an error naming the library
//! and the package, and nothing panics. The library is remembered per process, so the
//! checks run in a child with `HVD_LIBFABRIC_LIBRARY` pointing nowhere.

use std::process::Command;
use std::sync::Arc;

use hvd_core::MemoryStore;
use hvd_rdma::{RdmaCollective, RdmaConfig};

const CHILD: &str = "HVD_RDMA_TEST_MISSING_CHILD";
const NOWHERE: &str = "/nonexistent/libfabric.so.1";

#[test]
fn a_missing_libfabric_is_an_error_naming_the_package() {
    if std::env::var_os(CHILD).is_some() {
        let store = Arc::new(MemoryStore::new());
        let connect = RdmaCollective::connect(store, 0, 1, RdmaConfig::default());
        println!(
            "CONNECT: {}",
            connect
                .map(|_| ())
                .map_err(|e| e.to_string())
                .err()
                .unwrap_or_default()
        );
        let providers = hvd_rdma::providers();
        println!(
            "PROVIDERS: {}",
            providers
                .map(|_| ())
                .map_err(|e| e.to_string())
                .err()
                .unwrap_or_default()
        );
        return;
    }
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test binary: {e}"));
    let output = Command::new(exe)
        .args([
            "a_missing_libfabric_is_an_error_naming_the_package",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("HVD_LIBFABRIC_LIBRARY", NOWHERE)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the child: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let expected = format!(
        "libfabric ({NOWHERE}) is not available: install it with `apt-get install libfabric1` (Debian, Ubuntu) or `yum install libfabric` (RHEL, Fedora), or set HVD_LIBFABRIC_LIBRARY to its path ({NOWHERE}: cannot open shared object file: No such file or directory)"
    );
    assert!(
        stdout.contains(&format!("CONNECT: {expected}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("PROVIDERS: {expected}\n")),
        "{stdout}"
    );
}
