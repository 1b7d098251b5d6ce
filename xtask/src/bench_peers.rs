//! `cargo xtask bench-peers`: hvd-bench next to the peer implementations, in one run.
//!
//! For each job size it runs, alternately and `--repeats` times, hvd's allreduce over its
//! TCP transport, Open MPI's `MPI_Allreduce` over TCP on loopback and over shared memory
//! (the peer benchmark in the peers directory), and torch.distributed's Gloo when PyTorch
//! is installed; then allgather, broadcast and alltoall against Open MPI over TCP at the
//! same sizes ([`crate::bench_collectives`]). It
//! prints each median and hvd's speed-up (the peer's time over hvd's). Missing peers are
//! skipped with the command that installs them. With libfabric installed, a second
//! table puts hvd's RDMA transport beside them ([`crate::bench_fabric`]).
//!
//! `--json FILE` also writes every median as a JSON line (collective, rank count, bytes,
//! implementation, median µs, repeats), which `hvd-bench plot` draws.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::measure::{
    JsonLines, PAIRED, Series, Sweep, add, fmt_us, hvd_rows, median, mpi_rows, mpirun, options,
    paired_speedup, run_capture, runs,
};
use crate::workspace_root;

/// `(bytes, median µs)` of the Gloo peer's `RES` lines (`sync_med=...us`).
fn gloo_rows(stdout: &str) -> Vec<(usize, f64)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("RES "))
        .filter_map(|l| {
            let bytes = l.split_whitespace().nth(1)?.parse().ok()?;
            let med = l.split("sync_med=").nth(1)?.trim_start();
            Some((bytes, med[..med.find("us")?].trim().parse().ok()?))
        })
        .collect()
}

struct Peers {
    mpirun: bool,
    allreduce: Option<PathBuf>,
    collectives: Option<PathBuf>,
    /// The Python that has torch (the tests' environment first), and the Gloo script.
    gloo: Option<(PathBuf, PathBuf)>,
}

fn compile_peers(root: &Path, peers: &Path) -> Peers {
    let out = root.join("target/peers");
    let _ = std::fs::create_dir_all(&out);
    let mpicc = |src: PathBuf, bin: &str| -> Option<PathBuf> {
        let bin = out.join(bin);
        let ok = Command::new("mpicc")
            .args(["-O2", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(bin)
    };
    let mpirun = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let allreduce = mpirun
        .then(|| mpicc(peers.join("mpi_allreduce_bench.c"), "mpi_allreduce_bench"))
        .flatten();
    let collectives = mpirun
        .then(|| {
            mpicc(
                root.join("xtask/peers/mpi_collectives.c"),
                "mpi_collectives",
            )
        })
        .flatten();
    let has_torch = |python: &Path| {
        Command::new(python)
            .args(["-c", "import torch"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let python = [crate::python::venv().join("bin/python"), "python3".into()]
        .into_iter()
        .find(|python| has_torch(python));
    let gloo = peers.join("torch_gloo_bench.py");
    Peers {
        mpirun,
        allreduce,
        collectives,
        gloo: python
            .filter(|_| gloo.exists())
            .map(|python| (python, gloo)),
    }
}

/// Takes `--json FILE`, bench-peers' own option, out of `args`; the rest are the options
/// it shares with the other benchmarks.
fn json_option(args: &[String]) -> Result<(Option<PathBuf>, Vec<String>), String> {
    let mut json = None;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--json" {
            let path = it.next().ok_or("--json needs a file to write")?;
            json = Some(PathBuf::from(path));
        } else {
            rest.push(arg.clone());
        }
    }
    Ok((json, rest))
}

pub fn run(args: &[String]) -> Result<(), String> {
    let (json, args) = json_option(args)?;
    let o = options(&args)?;
    let mut json = json.as_deref().map(JsonLines::create).transpose()?;
    let root = workspace_root();
    let fabric = crate::bench_fabric::available();
    let mut build = Command::new("cargo");
    build.args(["build", "--release", "--bin", "hvd-bench"]);
    if fabric {
        build.args(["--features", "hvd/rdma"]);
    } else {
        println!(
            "bench-peers: skipping libfabric (install: apt-get install libfabric-dev libfabric-bin)"
        );
    }
    let status = build.current_dir(&root).status();
    if !status.is_ok_and(|s| s.success()) {
        return Err("building hvd-bench failed".into());
    }
    let bench = root.join("target/release/hvd-bench");
    let peers = compile_peers(&root, &o.peers);
    if !peers.mpirun {
        println!(
            "bench-peers: skipping Open MPI (install: apt-get install openmpi-bin libopenmpi-dev)"
        );
    }
    if peers.gloo.is_none() {
        println!(
            "bench-peers: skipping torch.distributed Gloo: no Python with torch in {} or on PATH (install: {})",
            crate::python::venv().display(),
            crate::python::install_hint(&crate::python::venv())
        );
    }
    let sizes: Vec<String> = o.sizes.iter().map(|s| s.to_string()).collect();
    let size_list = o
        .sizes
        .iter()
        .map(|s| format!("{s}"))
        .collect::<Vec<_>>()
        .join(",");
    for &np in &o.nps {
        let (mut hvd, mut hvd_shm, mut tcp, mut shm, mut gloo) = (
            Series::new(),
            Series::new(),
            Series::new(),
            Series::new(),
            Series::new(),
        );
        for _ in 0..o.repeats {
            for (series, backend) in [(&mut hvd, "tcp"), (&mut hvd_shm, "shm")] {
                let out = run_capture(Command::new(&bench).args([
                    "allreduce",
                    "--backend",
                    backend,
                    "--np",
                    &np.to_string(),
                    "--sizes",
                    &size_list,
                    "--json",
                ]))?;
                add(series, hvd_rows(&out));
            }
            if let Some(bin) = &peers.allreduce {
                add(
                    &mut tcp,
                    mpi_rows(
                        &run_capture(mpirun(np, "tcp,self").arg(bin).args(&sizes))?,
                        1,
                        4,
                    ),
                );
                add(
                    &mut shm,
                    mpi_rows(
                        &run_capture(mpirun(np, "vader,self").arg(bin).args(&sizes))?,
                        1,
                        4,
                    ),
                );
            }
            if let Some((python, script)) = &peers.gloo {
                let out = run_capture(
                    Command::new(python)
                        .arg(script)
                        .args(["--world", &np.to_string(), "--no-fusion", "--sizes"])
                        .args(&sizes),
                )?;
                add(&mut gloo, gloo_rows(&out));
            }
        }
        println!(
            "\n### allreduce, f32 sum, {np} ranks, loopback (median of {} alternating runs; speed-up = peer time / hvd time; {PAIRED})\n",
            o.repeats
        );
        println!(
            "| size | hvd TCP | Open MPI TCP | speed-up | hvd shm | Open MPI shm (vader) | speed-up | Gloo | speed-up vs hvd TCP |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for bytes in &o.sizes {
            let m = |s: &Series| s.get(bytes).and_then(|v| median(v));
            let (h, hs) = (m(&hvd), m(&hvd_shm));
            println!(
                "| {bytes} | {} | {} | {} | {} | {} | {} | {} | {} |",
                fmt_us(h),
                fmt_us(m(&tcp)),
                paired_speedup(runs(&tcp, *bytes), runs(&hvd, *bytes)),
                fmt_us(hs),
                fmt_us(m(&shm)),
                paired_speedup(runs(&shm, *bytes), runs(&hvd_shm, *bytes)),
                fmt_us(m(&gloo)),
                paired_speedup(runs(&gloo, *bytes), runs(&hvd, *bytes))
            );
        }
        if let Some(json) = &mut json {
            for (implementation, series) in [
                ("hvd tcp", &hvd),
                ("hvd shm", &hvd_shm),
                ("Open MPI TCP", &tcp),
                ("Open MPI shared memory", &shm),
                ("torch Gloo", &gloo),
            ] {
                json.write("allreduce", np, implementation, series)?;
            }
        }
        let sweep = Sweep {
            bench: &bench,
            np,
            sizes: &o.sizes,
            repeats: o.repeats,
        };
        if fabric {
            crate::bench_fabric::table(
                &sweep,
                peers.allreduce.as_deref().filter(|_| peers.mpirun),
                (&hvd, &hvd_shm),
                json.as_mut(),
            )?;
        }
        let peer = peers.collectives.as_deref().filter(|_| peers.mpirun);
        crate::bench_collectives::tables(&sweep, peer, json.as_mut())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn json_is_taken_out_of_the_shared_options() {
        assert_eq!(
            json_option(&strings(&[
                "--np",
                "2",
                "--json",
                "peers.jsonl",
                "--repeats",
                "1"
            ])),
            Ok((
                Some(PathBuf::from("peers.jsonl")),
                strings(&["--np", "2", "--repeats", "1"])
            ))
        );
        assert_eq!(
            json_option(&strings(&["--np", "2"])),
            Ok((None, strings(&["--np", "2"])))
        );
        assert_eq!(
            json_option(&strings(&["--json"])),
            Err("--json needs a file to write".to_string())
        );
    }
}
