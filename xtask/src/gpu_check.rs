//! `cargo xtask gpu-check`: everything that needs a real GPU, in one command. It builds
//! (release) what the checks need into a bundle folder, small enough to copy to a GPU
//! machine that has only a driver, CUDA's libraries and PyTorch (no Rust toolchain), and
//! without `--bundle` runs the bundle's `run` script here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// The most a bundle may weigh: the GPU machines take 64 MiB of files.
const MAX_BUNDLE: u64 = 60 << 20;

/// What goes in the bundle, from the workspace: (cargo arguments, built file, bundle name).
const PROGRAMS: [(&[&str], &str, &str); 3] = [
    (
        &["-p", "hvdrun", "--features", "nccl", "--bin", "hvdrun"],
        "hvdrun",
        "hvdrun",
    ),
    (
        &[
            "-p",
            "hvd-bench",
            "--features",
            "nccl",
            "--bin",
            "hvd-bench",
        ],
        "hvd-bench",
        "hvd-bench",
    ),
    (
        &["-p", "hvd", "--features", "nccl", "--example", "gpu_check"],
        "examples/gpu_check",
        "gpu_check",
    ),
];

/// candle's MNIST example on CUDA.
const CANDLE_CUDA: &[&str] = &[
    "-p",
    "hvd",
    "--features",
    "candle-cuda",
    "--example",
    "train_mnist",
];

/// The checks' script, written into the bundle as `run`.
const RUN: &str = include_str!("gpu_check_run.sh");

#[derive(Debug)]
struct Options {
    /// Build the bundle here and stop.
    bundle: Option<PathBuf>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut bundle = None;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--bundle" => {
                    bundle = Some(PathBuf::from(args.next().ok_or("--bundle needs a folder")?))
                }
                other => return Err(format!("gpu-check: unknown option {other:?}")),
            }
        }
        Ok(Options { bundle })
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let options = Options::parse(args)?;
    let root = workspace_root();
    let dir = options
        .bundle
        .clone()
        .unwrap_or_else(|| root.join("target/gpu-check"));
    build(&root, &dir)?;
    if options.bundle.is_some() {
        println!(
            "gpu-check: copy {} to a machine with a GPU and run {}/run there",
            dir.display(),
            dir.display()
        );
        return Ok(());
    }
    let status = Command::new(dir.join("run"))
        .status()
        .map_err(|e| format!("cannot run {}/run: {e}", dir.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("some GPU checks failed ({status})"))
    }
}

fn cargo(args: &[&str], root: &Path) -> Result<(), String> {
    let status = Command::new("cargo")
        .args(["build", "--release"])
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("cargo build --release {} failed", args.join(" ")))
}

/// Copies `from` to `to`, stripped of symbols when `strip` is there (the bundle must
/// stay small; the line tables are not needed to read a failure's message).
fn install(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to).map_err(|e| format!("copying {}: {e}", from.display()))?;
    let _ = Command::new("strip").arg(to).status();
    Ok(())
}

/// Builds the bundle into `dir`: the programs, the hvd wheel (when it can be built
/// here), the peer benchmark and the PyTorch example, and the `run` script.
fn build(root: &Path, dir: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    for sub in ["bin", "python"] {
        std::fs::create_dir_all(dir.join(sub))
            .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    for (args, built, name) in PROGRAMS {
        cargo(args, root)?;
        install(
            &root.join("target/release").join(built),
            &dir.join("bin").join(name),
        )?;
    }
    // candle on CUDA needs CUDA's compiler to build its kernels.
    if crate::requirements::on_path("nvcc") {
        cargo(CANDLE_CUDA, root)?;
        // candle's kernels make it 52 MiB stripped; gzip brings it to 13.
        let program = dir.join("bin/train_mnist");
        install(&root.join("target/release/examples/train_mnist"), &program)?;
        let status = Command::new("gzip")
            .args(["-9", "-n"])
            .arg(&program)
            .status()
            .map_err(|e| format!("cannot run gzip: {e}"))?;
        if !status.success() {
            return Err(format!("gzip {} failed", program.display()));
        }
    } else {
        println!(
            "gpu-check: the bundle has no train_mnist for CUDA, so its train_mnist check will \
             fail: building candle's CUDA kernels needs nvcc on PATH (CUDA's toolkit, or \
             pip's cuda-toolkit[nvcc])"
        );
    }
    let wheel = wheel(root, &dir.join("python"));
    if let Err(why) = &wheel {
        println!("gpu-check: the bundle has no hvd wheel, so its torch check will fail: {why}");
    }
    let peers = root.join("../shared/peers/torch_dist_bench.py");
    let copied = [
        (peers, dir.join("python/torch_dist_bench.py")),
        (
            root.join("examples/pytorch/train_mnist.py"),
            dir.join("python/train_mnist.py"),
        ),
    ];
    for (from, to) in copied {
        if let Err(e) = std::fs::copy(&from, &to) {
            println!("gpu-check: not in the bundle: {} ({e})", from.display());
        }
    }
    let run = dir.join("run");
    std::fs::write(&run, RUN).map_err(|e| format!("writing {}: {e}", run.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", run.display()))?;
    let size = folder_size(dir);
    println!(
        "gpu-check: bundle {} is {:.1} MiB (at most {} MiB)",
        dir.display(),
        size as f64 / (1 << 20) as f64,
        MAX_BUNDLE >> 20
    );
    if size > MAX_BUNDLE {
        return Err(format!(
            "the bundle is larger than {} MiB",
            MAX_BUNDLE >> 20
        ));
    }
    Ok(())
}

/// The hvd wheel, built into `out` with maturin from the Python environment.
fn wheel(root: &Path, out: &Path) -> Result<(), String> {
    let venv = crate::python::venv();
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .map_err(|e| format!("PATH: {e}"))?;
    let status = Command::new(root.join("hvd-python/build-wheel"))
        .arg("--out")
        .arg(out)
        .env("PATH", path)
        .status()
        .map_err(|e| format!("cannot run hvd-python/build-wheel: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("hvd-python/build-wheel failed ({status})"))
}

fn folder_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let path = e.path();
                    if path.is_dir() {
                        folder_size(&path)
                    } else {
                        e.metadata().map_or(0, |m| m.len())
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_script_on_a_machine_without_a_gpu_says_so_and_fails_cleanly() {
        let dir = std::env::temp_dir().join(format!("hvd-gpu-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = dir.join("run");
        std::fs::write(&run, RUN).unwrap();
        // A driver library that is not there: no GPU, whatever the host has.
        let out = Command::new("bash")
            .arg(&run)
            .env("HVD_GPU_CHECK_LIBCUDA", dir.join("no-libcuda.so.1"))
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines[0],
            "FAIL driver: no NVIDIA driver here (libcuda.so.1 not found): run this bundle on a machine with a GPU"
        );
        assert!(
            lines[1..]
                .iter()
                .all(|l| l.starts_with("FAIL ") && l.ends_with(": not run: no GPU")),
            "{stdout}"
        );
        assert_eq!(lines.len(), 11, "one line per check: {stdout}");
    }
}
