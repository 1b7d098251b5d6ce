//! Project automation, run as `cargo xtask <command>`.
//!
//! - `train`: the README's first command; builds the launcher and the train_mnist example
//!   and trains it on 2 local ranks.
//! - `test-cluster`: builds and runs every test of the workspace, the multi-process ones
//!   included, for every transport whose system library is present, and says which it
//!   skipped and why (with the command that installs what is missing); then the Python
//!   front's pytest jobs, when a virtual environment with torch is present.
//! - `bench-peers`: hvd-bench next to Open MPI and Gloo, in one run, as speed-ups.
//! - `bench-torch`: `hvd.torch` next to torch's DistributedDataParallel (Gloo), in one run.
//! - `bench-tf`: `hvd.keras` next to TensorFlow's MultiWorkerMirroredStrategy, in one run.
//! - `bench-mpi`: hvd's MPI transport next to plain `MPI_Allreduce`, as overheads.
//! - `scaling`: hvd-bench across the simulated cluster, for the scaling model.
//! - `fuzz`: every fuzz target of `fuzz/` for a few seconds each (CI), or longer.
//! - `gpu-check`: the checks that need a real GPU, as a bundle to copy to one.
//! - `horovod-tests`: Horovod's own PyTorch and TensorFlow test files and PyTorch examples
//!   against `hvd`.
//! - `book`: the book under `docs/`, built with mdBook and its links and code blocks checked.
//! - `circles`: no import circle between the modules of any crate or of the Python package.

mod backends;
mod bench_collectives;
mod bench_fabric;
mod bench_mpi;
mod bench_peers;
mod bench_tf;
mod bench_torch;
mod bench_training;
mod book;
mod circles;
mod cluster;
mod cuda_headers;
mod fuzz;
mod gpu_check;
mod horovod_tests;
mod interrupt;
mod measure;
mod python;
mod requirements;
mod scaling;
mod test_cluster;
mod train;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  train [--np 2] [-- <train_mnist arguments>]
      Build hvdrun and the train_mnist example (release) and train on N local ranks
      over shared memory: loss, test accuracy and throughput per epoch, and a checkpoint.
  test-cluster [--hosts 4] [--ranks-per-host 2] [--link 10gbit] [--filter NAME]
               [--cluster-only] [-- <extra test-runner args>]
      Run every test, multi-process ones included, for every transport whose system
      library is present; name the skipped ones and how to enable them. Then, as root,
      build a simulated cluster (hosts as network namespaces with an sshd each, links
      to a bridge shaped to --link) and run the cross-host tests and fault scenarios
      across it, and tear it down (also after Ctrl-C). Then build the hvd wheel and run
      its pytest jobs in $HVD_VENV (default ~/.cache/hvd-venv), making that environment
      first when it is missing (torch, numpy, maturin, pytest from PyPI: ~3 GB).
  bench-peers [--np 2,4] [--sizes 4K,1M,256M] [--repeats 3] [--peers DIR] [--json FILE]
      Run hvd-bench next to Open MPI (TCP and shared memory) and Gloo in one run and
      print the medians and hvd's speed-ups; --json also writes every median as JSON
      lines, which `hvd-bench plot --input FILE --output FIGURE.svg` draws.
  bench-torch [--models mlp,cnn] [--np 2] [--epochs 2] [--repeats 3] [--peers DIR]
              [--installed]
      Build the hvd wheel into $HVD_VENV and train the same job with hvd.torch (under
      hvdrun) and with DistributedDataParallel over Gloo, alternately; print the median
      examples/s of each, hvd's ratio and both final losses. --installed uses the hvd
      already installed there instead of building the wheel.
  bench-tf [--models mlp,cnn] [--np 2] [--epochs 2] [--repeats 3] [--installed]
      The same for Keras: build the hvd wheel into $HVD_VENV (which needs tensorflow-cpu)
      and train a Keras model with hvd.keras (under hvdrun) and with TensorFlow's
      MultiWorkerMirroredStrategy (workers on localhost), alternately; print the median
      examples/s of each, hvd's ratio and both final losses.
  bench-mpi [--np 2,4] [--sizes 1M,64M] [--repeats 3] [--peers DIR]
      Run hvd-bench --backend mpi and plain MPI_Allreduce alternately under mpirun and
      print the medians and hvd's overhead.
  scaling [--hosts 2,4,8] [--links 1gbit,2500mbit] [--models resnet101,inception3,vgg16]
          [--compute-scale 25] [--fusion on,off] [--compression none] [--iters 3] [--out DIR]
      As root: on the simulated cluster (one rank per host), measure the allreduce and
      each model's training throughput with compute dilated by --compute-scale, for
      every link speed and host count; JSON lines into DIR (default target/scaling)
      for `hvd-bench model`.
  gpu-check [--bundle DIR]
      Everything that needs a real GPU: build (release) the programs the checks need,
      the hvd wheel and the scripts into a bundle under 60 MiB, and run its `run`
      script here; with --bundle, only build it into DIR, to copy to a machine with a
      GPU (a driver, NCCL and PyTorch; no Rust needed) and run DIR/run there. Prints one
      PASS/FAIL line per check with the figure that decided it, within 5 minutes, and
      keeps each check's whole output in DIR/logs/<check>.log.
  fuzz [--seconds 12 | --runs N]
      Run every fuzz target (needs cargo-fuzz) from its kept corpus: every decoder of
      bytes another process sends.
  horovod-tests [--suite DIR] [--parts whole,iso,examples] [--files torch,...]
                [--only 'test_a test_b']
      Build the hvd wheel into $HVD_VENV and run Horovod's own test files (torch;
      tensorflow under Keras 3 and under tf_keras; tensorflow2_keras-tf_keras) and two
      of its PyTorch examples with it (the suite's run.sh, 2 ranks: each file whole in
      one job, each test in a job of its own, the examples); fail on any test that is
      not passed, or skipped or failed for a listed reason (a GPU, Horovod's own skips,
      torch's Muon in the optimizer sweeps, TensorFlow's error class in graphs). The
      suite is ../shared/horovod-tests beside the repository unless --suite or
      HVD_HOROVOD_TESTS says otherwise.
  book [--check-only]
      Check the book under docs/ offline (every relative link and #anchor of the book
      and the README resolves, every page is in SUMMARY.md, every code block is a
      doctest, a Python block test_book.py compiles or runs, or marked as shown only),
      then build it with mdbook into target/book.
  circles
      Fail on any import circle: modules of a crate (or of the Python package) that
      import each other, directly or around a longer loop; each is printed as a loop.";

/// The workspace's root directory (xtask lives one level below it).
pub(crate) fn workspace_root() -> std::path::PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .map_or_else(|| here.to_path_buf(), std::path::Path::to_path_buf)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("train") => train::run(&args[1..]),
        Some("test-cluster") => test_cluster::run(&args[1..]),
        Some("bench-peers") => bench_peers::run(&args[1..]),
        Some("bench-torch") => bench_torch::run(&args[1..]),
        Some("bench-tf") => bench_tf::run(&args[1..]),
        Some("bench-mpi") => bench_mpi::run(&args[1..]),
        Some("scaling") => scaling::run(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("gpu-check") => gpu_check::run(&args[1..]),
        Some("horovod-tests") => horovod_tests::run(&args[1..]),
        Some("book") => book::run(&args[1..]),
        Some("circles") => circles::run(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command '{other}'\n\n{USAGE}")),
        None => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
