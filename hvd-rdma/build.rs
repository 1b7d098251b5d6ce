//! Decides whether the tests that need libfabric run here.
//!
//! `cfg(have_libfabric)` is set when the library is found, and always under `CI=true`: CI
//! installs libfabric, so there a missing library must fail the tests, not skip them.

use std::path::Path;

const DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/opt/amazon/efa/lib",
    "/opt/amazon/efa/lib64",
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_libfabric)");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=HVD_LIBFABRIC_LIBRARY");
    println!("cargo::rerun-if-env-changed=LD_LIBRARY_PATH");
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if in_ci || found() {
        println!("cargo::rustc-cfg=have_libfabric");
    }
}

fn found() -> bool {
    if let Ok(path) = std::env::var("HVD_LIBFABRIC_LIBRARY") {
        return Path::new(&path).exists();
    }
    let from_env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    from_env
        .split(':')
        .filter(|d| !d.is_empty())
        .chain(DIRS.iter().copied())
        .any(|dir| Path::new(dir).join("libfabric.so.1").exists())
}
