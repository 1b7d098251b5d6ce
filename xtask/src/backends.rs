//! The transports of the workspace and how to tell whether this machine can test them.

use std::path::Path;
use std::process::{Command, Stdio};

/// A transport crate and what it needs from the system.
pub struct Backend {
    pub name: &'static str,
    /// The workspace directory of its crate.
    pub crate_dir: &'static str,
    /// The Cargo feature of the `hvd` facade that turns it on (None: always on).
    pub feature: Option<&'static str>,
    /// Checks the system library; `Err` says what is missing.
    pub probe: fn() -> Result<(), String>,
    /// The command that installs what it needs.
    pub install: &'static str,
    /// The Debian packages of that command, which test-cluster installs itself when
    /// it runs as root (none where no package will do).
    pub packages: &'static [&'static str],
}

/// Whether this backend can be tested here, and if not, why.
pub enum Availability {
    Ready,
    Skipped(String),
}

pub fn all() -> Vec<Backend> {
    vec![
        Backend {
            name: "tcp",
            crate_dir: "hvd-gloo-tcp",
            feature: None,
            probe: || Ok(()),
            install: "nothing: pure Rust",
            packages: &[],
        },
        Backend {
            name: "shm",
            crate_dir: "hvd-shm",
            feature: None,
            probe: || {
                if std::path::Path::new("/dev/shm").is_dir() {
                    Ok(())
                } else {
                    Err("/dev/shm is not mounted".into())
                }
            },
            install: "a Linux host with /dev/shm (tmpfs)",
            packages: &[],
        },
        Backend {
            name: "mpi",
            crate_dir: "hvd-mpi",
            feature: Some("mpi"),
            probe: || {
                command_works("mpirun", &["--version"]).and(command_works("mpicc", &["--version"]))
            },
            install: "apt-get install openmpi-bin libopenmpi-dev libclang-dev clang pkg-config",
            packages: &[
                "openmpi-bin",
                "libopenmpi-dev",
                "libclang-dev",
                "clang",
                "pkg-config",
            ],
        },
        Backend {
            name: "nccl",
            crate_dir: "hvd-nccl",
            feature: Some("nccl"),
            // Tested everywhere against the GPU test double; on a GPU by `cargo xtask
            // gpu-check`.
            probe: || Ok(()),
            install: "nothing: tested against hvd-gpu-double",
            packages: &[],
        },
        Backend {
            name: "rdma",
            crate_dir: "hvd-rdma",
            feature: Some("rdma"),
            probe: || command_works("fi_info", &["--version"]),
            install: "apt-get install libfabric-dev libfabric-bin libibverbs-dev librdmacm-dev",
            packages: &[
                "libfabric-dev",
                "libfabric-bin",
                "libibverbs-dev",
                "librdmacm-dev",
            ],
        },
    ]
}

impl Backend {
    pub fn availability(&self, root: &Path) -> Availability {
        if !root.join(self.crate_dir).join("Cargo.toml").exists() {
            return Availability::Skipped(format!(
                "crate {} is not in this workspace yet",
                self.crate_dir
            ));
        }
        match (self.probe)() {
            Ok(()) => Availability::Ready,
            Err(missing) => Availability::Skipped(format!("{missing}; install: {}", self.install)),
        }
    }
}

fn command_works(program: &str, args: &[&str]) -> Result<(), String> {
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("`{program}` is present but failed ({s})")),
        Err(_) => Err(format!("`{program}` is not on PATH")),
    }
}
