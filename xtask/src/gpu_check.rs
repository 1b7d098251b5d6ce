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

/// Runs Horovod's programs with more ranks than GPUs; written as `python/share_gpus.py`.
const SHARE_GPUS: &str = include_str!("gpu_check_share_gpus.py");

/// The PyPI package Horovod's test helper imports that the GPU machine lacks.
const MOCK: &str = "mock";

#[derive(Debug)]
struct Options {
    /// Build the bundle here and stop.
    bundle: Option<PathBuf>,
    /// Run the PyTorch checks on CUDA (`run torch-gpu`) instead of the default ones.
    torch_gpu: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            bundle: None,
            torch_gpu: false,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--bundle" => {
                    options.bundle =
                        Some(PathBuf::from(args.next().ok_or("--bundle needs a folder")?))
                }
                "torch-gpu" => options.torch_gpu = true,
                other => return Err(format!("gpu-check: unknown option {other:?}")),
            }
        }
        Ok(options)
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
            "gpu-check: copy {0} to a machine with a GPU and run {0}/run there, and {0}/run \
             torch-gpu for the PyTorch checks on CUDA (each check's output goes to {0}/logs)",
            dir.display()
        );
        return Ok(());
    }
    let status = Command::new(dir.join("run"))
        .args(options.torch_gpu.then_some("torch-gpu"))
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
    if let Err(why) = download(MOCK, &dir.join("python")) {
        println!(
            "gpu-check: the bundle has no {MOCK} wheel, so its torch-gpu-test_torch check will fail: {why}"
        );
    }
    let peers = root.join("../shared/peers/torch_dist_bench.py");
    let copied = [
        (peers, dir.join("python/torch_dist_bench.py")),
        (
            root.join("examples/pytorch/train_mnist.py"),
            dir.join("python/train_mnist.py"),
        ),
        (
            root.join("examples/pytorch/bench_resnet50.py"),
            dir.join("python/bench_resnet50.py"),
        ),
    ];
    for (from, to) in copied {
        if let Err(e) = std::fs::copy(&from, &to) {
            println!("gpu-check: not in the bundle: {} ({e})", from.display());
        }
    }
    write(&dir.join("python/share_gpus.py"), SHARE_GPUS)?;
    if let Err(why) = horovod_suite(root, &dir.join("python/horovod-tests")) {
        println!(
            "gpu-check: the bundle has no Horovod tests, so its torch-gpu checks of them will fail: {why}"
        );
    }
    let run = dir.join("run");
    write(&run, RUN)?;
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

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Horovod's test suite (the shim and its upstream files) copied into `out`, with the
/// failures it has on CPU too, for the GPU machine's verdict: one `test<TAB>what its
/// failure says<TAB>why` line each in `cpu_failures.tsv`.
fn horovod_suite(root: &Path, out: &Path) -> Result<(), String> {
    let suite = crate::horovod_tests::locate(None, root)?;
    for part in ["shim", "upstream"] {
        copy_folder(&suite.join(part), &out.join(part))?;
    }
    write(&out.join("cpu_failures.tsv"), &cpu_failures())
}

fn cpu_failures() -> String {
    crate::horovod_tests::excused_failures()
        .map(|(test, says, why)| format!("{test}\t{says}\t{why}\n"))
        .collect()
}

fn copy_folder(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("creating {}: {e}", to.display()))?;
    let entries = std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?;
    for entry in entries.flatten() {
        let (path, target) = (entry.path(), to.join(entry.file_name()));
        if path.is_dir() {
            copy_folder(&path, &target)?;
        } else {
            std::fs::copy(&path, &target)
                .map_err(|e| format!("copying {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// A package's wheel from PyPI into `out`, without its dependencies (the GPU machine has
/// no internet; the run script puts the wheel on PYTHONPATH there).
fn download(package: &str, out: &Path) -> Result<(), String> {
    let python = crate::python::venv().join("bin/python");
    let status = crate::python::pip_download(&python, out, &[package])
        .status()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("pip download {package} failed ({status})"))
}

/// The hvd wheel, built into `out` with maturin from the Python environment.
fn wheel(root: &Path, out: &Path) -> Result<(), String> {
    let path = crate::python::path_with(&crate::python::venv())?;
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

    /// A bundle of fakes that print what the real programs print on a one-GPU machine,
    /// so the run script's own logic (logs, limits, verdicts) runs without a GPU.
    /// `FAKE_FUSED_US` sets the fused time at 2 ranks; `FAKE_HANG=<pid file>` makes the
    /// one-rank fusion benchmark hang. For torch-gpu: `FAKE_HVD_IMG` sets hvd.torch's
    /// images/s at 2 ranks, `FAKE_FAILS` names a test of Horovod's that fails for a reason
    /// of hvd's, and `FAKE_PYTEST_HANG` makes the pytest session hang after two tests.
    const FAKES: [(&str, &str); 8] = [
        (
            "bin/hvdrun",
            r#"#!/usr/bin/env bash
case "$*" in
    --check-build) echo "  nccl  NCCL 2.28.9 (libnccl.so.2), CUDA driver 13.0 (libcuda.so.1), 1 x Fake GPU" ;;
    *" conformance") for _ in $(seq "$2"); do echo "PASSED 42 conformance checks on device memory"; done ;;
    *" killed")
        echo "ERROR: rank 0: lost rank 1 during allreduce"
        echo "ERROR: rank 2: lost rank 1 during allreduce"
        echo "hvdrun: rank 1 failed first (killed by signal 9); ranks 0, 2 failed because they lost rank 1"
        exit 1 ;;
    *" ops") echo '[{"name": "NCCL_ALLREDUCE"}, {"name": "MEMCPY_IN_FUSION_BUFFER"}]' >"$HVD_TIMELINE"; echo PASSED ;;
    *train_mnist.py*|*bench_resnet50.py*|*share_gpus*) FAKE_NP=$2; export FAKE_NP; shift 2; exec "$@" ;;
    *train_mnist*) echo "epoch  1/1  loss 0.1000  test accuracy 97.00%     1000 examples/s on 1 rank" ;;
    *) echo "fake hvdrun: unexpected $*"; exit 2 ;;
esac
"#,
        ),
        (
            "bin/hvd-bench",
            r#"#!/usr/bin/env bash
row() { echo "{\"op\":\"fusion\",\"variant\":\"$1\",\"time_us_median\":$2}"; }
case "$*" in
    "fusion --np 2 "*) row "fusion off" 1000; row "fusion on" "${FAKE_FUSED_US:-110}"; row "one tensor" 100 ;;
    "fusion --np 1 "*)
        if [ -n "${FAKE_HANG:-}" ]; then echo $$ >"$FAKE_HANG"; echo "hanging"; exec sleep 60; fi
        row "fusion off" 5000; row "fusion on" 1150; row "one tensor" 1100 ;;
    allreduce*) for b in 1048576 67108864 268435456; do echo "{\"bytes\":$b,\"time_us_median\":$((b / 1000))}"; done ;;
    *) echo "fake hvd-bench: unexpected $*"; exit 2 ;;
esac
"#,
        ),
        (
            "python/torch_dist_bench.py",
            r#"import json, sys
assert sys.argv[-1] == "--share-gpu", sys.argv
for b in (1 << 20, 64 << 20, 256 << 20):
    print(json.dumps({"bytes": b, "time_us_median": b / 900}))
"#,
        ),
        (
            "python/train_mnist.py",
            r#"import sys
import hvd_fake  # from the unpacked wheel
assert "--synthetic" in sys.argv, sys.argv
print("Test set: Average loss: 0.1513, Accuracy: 97.20%")
"#,
        ),
        (
            "python/bench_resnet50.py",
            r#"import json, os, sys
import hvd_fake  # from the unpacked wheel
mode = sys.argv[sys.argv.index("--mode") + 1]
ranks = int(os.environ.get("FAKE_NP", "2" if mode == "ddp" else "1"))
img = {("plain", 1): 2000, ("hvd", 1): 1960, ("ddp", 2): 700,
       ("hvd", 2): int(os.environ.get("FAKE_HVD_IMG", "735"))}[mode, ranks]
print(json.dumps({"bench": "resnet50", "mode": mode, "ranks": ranks, "img_per_s_per_rank": img,
                  "ms_per_step": 64e3 / img, "device_path": ["nccl", "by device pointer over nccl"]}))
"#,
        ),
        (
            "python/share_gpus.py",
            r#"import os, sys, time
import horovod, hvd_fake  # the shim and the wheel
if sys.argv[1:3] != ["-m", "pytest"]:
    assert sys.argv[1].endswith("examples/pytorch/pytorch_synthetic_benchmark.py"), sys.argv
    print("Iter #1: 1000.0 img/sec per GPU")
    print("Total img/sec on %s GPU(s): %d.0 +-1.0" % (os.environ["FAKE_NP"], 1000 * int(os.environ["FAKE_NP"])))
    sys.exit()
import mock  # from its wheel
assert sys.argv[-1].endswith("test/parallel/test_torch.py") and os.path.exists(sys.argv[-1]), sys.argv
fails = os.environ.get("FAKE_FAILS", "")
for rank in (0, 1):
    print(f"[{rank}]<stdout>: test_torch.py::TorchTests::test_horovod_allreduce PASSED [ 1%]")
    print(f"[{rank}]<stdout>: test_torch.py::TorchTests::test_horovod_rank PASSED [ 2%]")
    if os.environ.get("FAKE_PYTEST_HANG"):
        sys.stdout.flush()
        time.sleep(60)
    print(f"[{rank}]<stdout>: test_torch.py::TorchTests::test_model_parallelism SKIPPED (Not enough GPUs available) [ 3%]")
    for test in ("test_force_allreduce", "test_broadcast_state"):
        print(f"[{rank}]<stdout>: test_torch.py::TorchTests::{test} FAILED [ 4%]")
    if rank == 1 and fails:
        print(f"[1]<stdout>: test_torch.py::TorchTests::{fails} FAILED [ 5%]")
    print(f"[{rank}]<stdout>: FAILED test_torch.py::TorchTests::test_force_allreduce - ValueError: Muon only supports 2D parameters whereas we found 1-D")
    print(f"[{rank}]<stdout>: FAILED test_torch.py::TorchTests::test_broadcast_state - ValueError: Muon only supports 2D parameters whereas we found 1-D")
    if rank == 1 and fails:
        print(f"[1]<stdout>: FAILED test_torch.py::TorchTests::{fails} - RuntimeError: CUDA error: an illegal memory access")
"#,
        ),
        ("python/horovod-tests/shim/horovod/__init__.py", ""),
        (
            "path/nvidia-smi",
            "#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-fake)'\n",
        ),
    ];

    /// What the fake bundle prints for `run torch-gpu`, in order, when everything passes.
    const TORCH_GPU_PASSING: [&str; 6] = [
        "driver",
        "nccl: NCCL 2.28.9 (libnccl.so.2), CUDA driver 13.0 (libcuda.so.1), 1 x Fake GPU",
        "torch-gpu-resnet50-1: hvd.torch 1 rank: 0.98x plain (1960 vs 2000 img/s per rank, 32.7 vs 32.0 ms per step; at least 0.95x), hvd.torch path: nccl",
        "torch-gpu-resnet50-2: hvd.torch 2 ranks: 1.05x DDP (735 vs 700 img/s per rank, 87.1 vs 91.4 ms per step; at least 1.0x), hvd.torch path: nccl",
        "torch-gpu-synthetic: Total img/sec on 1 GPU(s): 1000.0 +-1.0; Total img/sec on 2 GPU(s): 2000.0 +-1.0",
        "torch-gpu-test_torch: 2 ranks: 2 passed, 2 failed, 1 skipped; failed as on CPU: test_broadcast_state, test_force_allreduce (torch's Muon takes 2-D parameters only (Horovod's sweep tries every torch.optim class))",
    ];

    /// What the fake bundle prints, in order, when everything passes.
    const PASSING: [&str; 12] = [
        "driver",
        "nccl: NCCL 2.28.9 (libnccl.so.2), CUDA driver 13.0 (libcuda.so.1), 1 x Fake GPU",
        "conformance-1: 1 rank(s): 42 conformance checks on device memory",
        "conformance-2: 2 rank(s): 42 conformance checks on device memory",
        "conformance-4: 4 rank(s): 42 conformance checks on device memory",
        "killed-rank: both survivors and hvdrun named rank 1",
        "ops-timeline: device collectives checked; the Timeline shows NCCL_ALLREDUCE and the device fusion copies",
        "fusion: fused 0.11 ms = 1.10x one tensor (at most 1.2x), unfused 1.00 ms = 9.1x fused (at least 5x)",
        "fusion-overhead: 200 x 64 KiB fused 1150.0 us, one tensor 1100.0 us: +50.0 us, 0.25 us per tensor (at most 0.5)",
        "bench: speed-up over torch.distributed NCCL (its time / hvd time): 1 MiB 1.11x, 64 MiB 1.11x, 256 MiB 1.11x",
        "torch: Test set: Average loss: 0.1513, Accuracy: 97.20%",
        "train_mnist: 1 rank(s) trained on CUDA: epoch 1/1 loss 0.1000 test accuracy 97.00% 1000 examples/s on 1 rank",
    ];

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hvd-gpu-check-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write_executable(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn succeeds(command: &mut Command) {
        let status = command.status().unwrap();
        assert!(status.success(), "{command:?}: {status}");
    }

    /// The run script in a folder of fakes; returns the folder.
    fn fake_bundle(name: &str) -> PathBuf {
        let dir = scratch(name);
        write_executable(&dir.join("run"), RUN);
        for (path, text) in FAKES {
            write_executable(&dir.join(path), text);
        }
        std::fs::write(dir.join("hvd_fake.py"), "").unwrap();
        succeeds(
            Command::new("python3")
                .args([
                    "-m",
                    "zipfile",
                    "-c",
                    "python/hvd-0.0.0-fake.whl",
                    "hvd_fake.py",
                ])
                .current_dir(&dir),
        );
        std::fs::write(dir.join("mock.py"), "").unwrap();
        succeeds(
            Command::new("python3")
                .args([
                    "-m",
                    "zipfile",
                    "-c",
                    "python/mock-0.0.0-fake.whl",
                    "mock.py",
                ])
                .current_dir(&dir),
        );
        let suite = dir.join("python/horovod-tests");
        for file in [
            "upstream/test/parallel/test_torch.py",
            "upstream/examples/pytorch/pytorch_synthetic_benchmark.py",
        ] {
            write_executable(&suite.join(file), "");
        }
        write(&suite.join("cpu_failures.tsv"), &cpu_failures()).unwrap();
        write_executable(&dir.join("bin/train_mnist"), "#!/bin/sh\n");
        succeeds(Command::new("gzip").arg(dir.join("bin/train_mnist")));
        dir
    }

    /// Runs a fake bundle's script with the fake driver; returns its exit code and lines.
    fn run_fake(dir: &Path, env: &[(&str, &str)]) -> (Option<i32>, Vec<String>) {
        run_fake_suite(dir, &[], env)
    }

    fn run_fake_suite(
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Option<i32>, Vec<String>) {
        let path = format!(
            "{}:{}",
            dir.join("path").display(),
            std::env::var("PATH").unwrap()
        );
        let out = Command::new("bash")
            .arg(dir.join("run"))
            .args(args)
            .env("PATH", path)
            .env("HVD_GPU_CHECK_LIBCUDA", dir.join("run"))
            .env_remove("HVD_GPU_CHECK_LOGS")
            .env_remove("HVD_GPU_CHECK_BUDGET")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        (out.status.code(), lines)
    }

    /// `run [suite] --budget`: each check's limit in seconds, in order, and their total.
    fn budget(run: &Path, suite: &[&str]) -> (Vec<(String, u64)>, u64) {
        let out = Command::new("bash")
            .arg(run)
            .args(suite)
            .arg("--budget")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let mut rows: Vec<(String, u64)> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| {
                let (name, seconds) = line.split_once(' ').unwrap();
                (name.to_string(), seconds.trim().parse().unwrap())
            })
            .collect();
        let (total_name, total) = rows.pop().unwrap();
        assert_eq!(total_name, "total");
        (rows, total)
    }

    #[test]
    fn the_run_script_is_bash_and_its_checks_fit_in_five_minutes_and_torch_gpu_in_six() {
        let dir = scratch("budget");
        let run = dir.join("run");
        std::fs::write(&run, RUN).unwrap();
        succeeds(Command::new("bash").arg("-n").arg(&run));
        for (suite, passing, most) in [
            (&[][..], &PASSING[..], 300),
            (&["torch-gpu"][..], &TORCH_GPU_PASSING[..], 6 * 60),
        ] {
            let (rows, total) = budget(&run, suite);
            let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
            let printed: Vec<&str> = passing
                .iter()
                .map(|l| l.split(':').next().unwrap())
                .collect();
            assert_eq!(names, printed);
            assert_eq!(total, rows.iter().map(|(_, s)| s).sum::<u64>());
            assert!(
                total <= most,
                "{suite:?}: the checks may take {total} s in all"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_check_passes_with_one_line_and_its_whole_output_in_a_log() {
        let dir = fake_bundle("pass");
        let (code, lines) = run_fake(&dir, &[]);
        assert_eq!(lines, passed(&dir, &PASSING));
        assert_eq!(code, Some(0));
        for (line, check) in lines
            .iter()
            .zip(PASSING.map(|l| l.split(':').next().unwrap()))
        {
            let log =
                std::fs::read_to_string(dir.join("logs").join(format!("{check}.log"))).unwrap();
            assert!(log.ends_with(&format!("{line}\n")), "{check}.log: {log}");
        }
        let log =
            |check: &str| std::fs::read_to_string(dir.join(format!("logs/{check}.log"))).unwrap();
        assert!(log("fusion").contains(r#""variant":"fusion on","time_us_median":110"#));
        assert!(log("bench").contains(
            "torch.distributed: 2 ranks on 1 GPU: each sets NCCL_HOSTID=peer-<rank> (--share-gpu)"
        ));
        assert!(log("killed-rank").contains("ERROR: rank 2: lost rank 1 during allreduce"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The lines of a run in which every check of `passing` passed.
    fn passed(dir: &Path, passing: &[&str]) -> Vec<String> {
        passing
            .iter()
            .map(|l| match l.split_once(": ") {
                Some(_) => format!("PASS {l}"),
                None => format!("PASS {l}: {}, 1 GPU(s)", dir.join("run").display()),
            })
            .collect()
    }

    #[test]
    fn torch_gpu_runs_apart_with_ratios_counts_and_each_step_in_its_log() {
        let dir = fake_bundle("torch-gpu");
        let (code, lines) = run_fake_suite(&dir, &["torch-gpu"], &[]);
        assert_eq!(lines, passed(&dir, &TORCH_GPU_PASSING));
        assert_eq!(code, Some(0));
        let log = |check: &str| {
            std::fs::read_to_string(dir.join(format!("logs/torch-gpu-{check}.log"))).unwrap()
        };
        assert!(log("resnet50-1").contains("bench_resnet50.py --mode plain\n"));
        assert!(log("resnet50-1").contains("hvdrun -np 1 python3 "));
        assert!(log("resnet50-2").contains("bench_resnet50.py --mode ddp --world 2\n"));
        assert!(log("synthetic").contains(
            "Horovod's programs run under share_gpus: CUDA device N is N modulo the 1 GPU(s)"
        ));
        assert!(
            log("synthetic")
                .contains("--num-warmup-batches 2 --num-batches-per-iter 5 --num-iters 2\n")
        );
        assert!(log("test_torch").contains(
            "[1]<stdout>: FAILED test_torch.py::TorchTests::test_broadcast_state - ValueError"
        ));
        assert!(!dir.join("logs/conformance-1.log").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn torch_gpu_fails_on_a_slow_hvd_and_a_failure_of_its_own_and_counts_a_hung_session() {
        let dir = fake_bundle("torch-gpu-fail");
        let (code, lines) = run_fake_suite(
            &dir,
            &["torch-gpu"],
            &[
                ("FAKE_HVD_IMG", "630"),
                ("FAKE_FAILS", "test_horovod_allgather"),
            ],
        );
        assert_eq!(code, Some(1));
        assert_eq!(
            lines[3],
            "FAIL torch-gpu-resnet50-2: hvd.torch 2 ranks: 0.90x DDP (630 vs 700 img/s per rank, 101.6 vs 91.4 ms per step; at least 1.0x), hvd.torch path: nccl"
        );
        assert_eq!(
            lines[5],
            "FAIL torch-gpu-test_torch: 2 ranks: 2 passed, 3 failed, 1 skipped; failed as on CPU: test_broadcast_state, test_force_allreduce (torch's Muon takes 2-D parameters only (Horovod's sweep tries every torch.optim class)); failed: test_horovod_allgather (RuntimeError: CUDA error: an illegal memory access)"
        );
        let started = std::time::Instant::now();
        let (code, lines) = run_fake_suite(
            &dir,
            &["torch-gpu"],
            &[
                ("FAKE_PYTEST_HANG", "1"),
                ("HVD_GPU_CHECK_BUDGET", "torch-gpu-test_torch=5"),
            ],
        );
        assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
        assert_eq!(code, Some(1));
        assert_eq!(
            lines[5],
            "FAIL torch-gpu-test_torch: timed out after 5 s (by then 2 ranks: 2 passed, 0 failed, 0 skipped)"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_check_that_hangs_fails_on_its_own_limit_and_the_rest_still_run() {
        let dir = fake_bundle("hang");
        let logs = dir.join("elsewhere");
        let pid_file = dir.join("hung.pid");
        let started = std::time::Instant::now();
        let (code, lines) = run_fake(
            &dir,
            &[
                ("HVD_GPU_CHECK_BUDGET", "fusion-overhead=5"),
                ("HVD_GPU_CHECK_LOGS", logs.to_str().unwrap()),
                ("FAKE_HANG", pid_file.to_str().unwrap()),
                ("FAKE_FUSED_US", "130"),
            ],
        );
        assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
        assert_eq!(code, Some(1));
        assert_eq!(
            lines[7],
            "FAIL fusion: fused 0.13 ms = 1.30x one tensor (at most 1.2x), unfused 1.00 ms = 7.7x fused (at least 5x)"
        );
        assert_eq!(
            lines[8],
            "FAIL fusion-overhead: timed out after 5 s (its log's last line: hanging)"
        );
        assert_eq!(lines.len(), PASSING.len(), "{lines:#?}");
        assert!(
            lines[9..].iter().all(|l| l.starts_with("PASS ")),
            "{lines:#?}"
        );
        // The hung command is gone, and the logs went where they were told to.
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        assert!(!Path::new(&format!("/proc/{}", pid.trim())).exists());
        assert!(logs.join("fusion-overhead.log").exists());
        assert!(!dir.join("logs").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_run_script_on_a_machine_without_a_gpu_says_so_and_fails_cleanly() {
        let dir = scratch("no-gpu");
        let run = dir.join("run");
        std::fs::write(&run, RUN).unwrap();
        // A driver library that is not there: no GPU, whatever the host has.
        let out = Command::new("bash")
            .arg(&run)
            .env("HVD_GPU_CHECK_LIBCUDA", dir.join("no-libcuda.so.1"))
            .env_remove("HVD_GPU_CHECK_LOGS")
            .output()
            .unwrap();
        let logged = dir.join("logs/train_mnist.log").exists();
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
        assert_eq!(lines.len(), PASSING.len(), "one line per check: {stdout}");
        assert!(logged);
    }
}
