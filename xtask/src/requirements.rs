//! What some tests need from the system, beyond a transport's library: tools for the
//! launcher's ssh tests, root for network namespaces, mpirun. The `hvdrun` build script
//! compiles a test that lacks what it needs as ignored (shown as skipped); this module
//! installs what is missing when it can, and counts what is still skipped.

use std::path::Path;
use std::process::Command;

use crate::workspace_root;

/// One thing tests may need.
pub struct Requirement {
    /// What it is, for the summary.
    pub what: &'static str,
    /// The cfg the `hvdrun` build script sets when it is present.
    pub cfg: &'static str,
    pub present: fn() -> bool,
    /// Debian packages that provide it.
    pub packages: &'static [&'static str],
    /// Root is needed besides the packages.
    pub needs_root: bool,
}

pub fn all() -> [Requirement; 3] {
    [
        Requirement {
            what: "sshd (the launcher's ssh tests)",
            cfg: "hvd_have_sshd",
            present: || {
                Path::new("/usr/sbin/sshd").exists() && on_path("ssh-keygen") && on_path("ssh")
            },
            packages: &["openssh-server", "openssh-client"],
            needs_root: false,
        },
        Requirement {
            what: "root and iproute2 (network-namespace hosts)",
            cfg: "hvd_have_netns",
            present: || is_root() && on_path("ip"),
            packages: &["iproute2"],
            needs_root: true,
        },
        Requirement {
            what: "mpirun (jobs started by Open MPI)",
            cfg: "hvd_have_mpirun",
            present: || on_path("mpirun"),
            packages: &["openmpi-bin"],
            needs_root: false,
        },
    ]
}

pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

impl Requirement {
    /// The command that provides it.
    pub fn install(&self) -> String {
        let root = if self.needs_root { "run as root; " } else { "" };
        format!("{root}apt-get install {}", self.packages.join(" "))
    }
}

/// Installs `packages` with apt-get when this process is root and has apt-get; says
/// what it did. Returns false when it could not.
pub fn apt_install(packages: &[&str]) -> bool {
    if packages.is_empty() {
        return true;
    }
    if !is_root() || !on_path("apt-get") {
        return false;
    }
    println!("test-cluster: installing {}", packages.join(" "));
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    let mut install = vec!["install", "-y", "-qq"];
    install.extend(packages);
    apt(&["update", "-qq"]) && apt(&install)
}

/// How many tests the workspace gates on `cfg`: attributes that ignore a test unless
/// it is set.
pub fn gated_tests(cfg: &str) -> usize {
    let mut count = 0;
    let mut dirs = vec![workspace_root()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "target" && name != ".git" {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                count += text
                    .split("#[cfg_attr(")
                    .skip(1)
                    .filter(|attr| {
                        let attr = attr.split(")]").next().unwrap_or_default();
                        attr.contains(cfg) && attr.contains("ignore")
                    })
                    .count();
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_requirement_gates_tests_under_the_cfg_the_build_script_sets() {
        let build_script = std::fs::read_to_string(workspace_root().join("hvdrun/build.rs"))
            .expect("the hvdrun build script");
        for requirement in all() {
            assert!(
                build_script.contains(&format!("\"{}\"", requirement.cfg)),
                "{} is not set by hvdrun/build.rs",
                requirement.cfg
            );
            assert!(
                gated_tests(requirement.cfg) > 0,
                "no test is gated on {}",
                requirement.cfg
            );
        }
    }
}
