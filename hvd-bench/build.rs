//! Whether a Python with torch, torchvision and Pillow is at hand, found as the data-gap
//! benchmark finds it: without one, the test that measures PyTorch's DataLoader is
//! compiled as ignored (shown as skipped, with why) rather than passing without running.
//! Under CI (`CI` set) it is always compiled to run: a CI machine without torch fails.

use std::process::Command;

include!("src/data_gap/python.rs");

fn main() {
    for var in ["CI", PYTHON_ENV, "HVD_VENV", "HOME", "PATH"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rustc-check-cfg=cfg(hvd_have_torch)");
    let python = candidate(None);
    // Finding the modules is enough, and takes milliseconds where importing torch takes
    // seconds.
    let probe = format!(
        "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in {MODULES:?}))"
    );
    let present = Command::new(&python)
        .args(["-c", &probe])
        .output()
        .is_ok_and(|out| out.status.success());
    if present || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=hvd_have_torch");
    }
}
