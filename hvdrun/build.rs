//! Finds which system tools the launcher's tests need are here, so a test that cannot
//! run is compiled as ignored (shown as skipped, with the command that installs what it
//! needs) rather than passing without running. Under CI (`CI` set) every test is
//! compiled to run: a missing tool there fails, because CI must install it.

use std::path::Path;

/// The cfgs a test can be gated on, and whether this machine has what each needs.
fn probes() -> [(&'static str, bool); 3] {
    [
        (
            "hvd_have_sshd",
            Path::new("/usr/sbin/sshd").exists() && on_path("ssh-keygen") && on_path("ssh"),
        ),
        ("hvd_have_netns", is_root() && on_path("ip")),
        ("hvd_have_mpirun", on_path("mpirun")),
    ]
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Root can make network namespaces (as far as anything short of trying can tell).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

fn main() {
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    // Installing a package changes these directories.
    for dir in ["/usr/bin", "/usr/sbin"] {
        if Path::new(dir).exists() {
            println!("cargo::rerun-if-changed={dir}");
        }
    }
    let ci = std::env::var_os("CI").is_some();
    for (cfg, present) in probes() {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if present || ci {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
