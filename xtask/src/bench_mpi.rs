//! `cargo xtask bench-mpi`: hvd's MPI transport next to plain `MPI_Allreduce`, in one run.
//!
//! Builds hvd-bench with the `mpi` feature and the peer `MPI_Allreduce` benchmark, then
//! runs them alternately (ABBA, so drift in the machine's load hits both alike) under the
//! same mpirun settings, Open MPI over shared memory, `--repeats` times per job size. It
//! prints each median and hvd's overhead (hvd's time over MPI's, minus one).

use std::process::Command;

use crate::measure::{
    Series, add, fmt_us, hvd_rows, median, mpi_rows, mpirun, options, run_capture,
};
use crate::workspace_root;

pub fn run(args: &[String]) -> Result<(), String> {
    let mut o = options(args)?;
    if !args.iter().any(|a| a == "--sizes") {
        o.sizes = vec![1 << 20, 4 << 20, 16 << 20, 64 << 20];
    }
    let root = workspace_root();
    let built = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--features",
            "hvd/mpi",
            "--bin",
            "hvd-bench",
        ])
        .current_dir(&root)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        return Err("building hvd-bench with the mpi feature failed".into());
    }
    let bench = root.join("target/release/hvd-bench");
    let peer = root.join("target/peers/mpi_allreduce_bench");
    let _ = std::fs::create_dir_all(root.join("target/peers"));
    let compiled = Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&peer)
        .arg(o.peers.join("mpi_allreduce_bench.c"))
        .status();
    if !compiled.is_ok_and(|s| s.success()) {
        return Err(format!(
            "compiling {} with mpicc failed (install: apt-get install openmpi-bin libopenmpi-dev)",
            o.peers.join("mpi_allreduce_bench.c").display()
        ));
    }
    let sizes: Vec<String> = o.sizes.iter().map(|s| s.to_string()).collect();
    for &np in &o.nps {
        let (mut hvd, mut raw) = (Series::new(), Series::new());
        for round in 0..o.repeats {
            for hvd_first in [round % 2 == 0, round % 2 != 0] {
                if hvd_first {
                    let out = run_capture(
                        mpirun(np, "vader,self")
                            .arg(&bench)
                            .args(["allreduce", "--backend", "mpi", "--json", "--sizes"])
                            .arg(sizes.join(",")),
                    )?;
                    add(&mut hvd, hvd_rows(&out));
                } else {
                    let out = run_capture(mpirun(np, "vader,self").arg(&peer).args(&sizes))?;
                    add(&mut raw, mpi_rows(&out, 1, 4));
                }
            }
        }
        println!(
            "\n### allreduce, f32 sum, {np} ranks, Open MPI shared memory (median of {} alternating runs)\n",
            o.repeats
        );
        println!("| size | MPI_Allreduce | hvd-bench --backend mpi | overhead |");
        println!("|---|---|---|---|");
        for bytes in &o.sizes {
            let (m, h) = (
                raw.get(bytes).and_then(|v| median(v)),
                hvd.get(bytes).and_then(|v| median(v)),
            );
            let overhead = match (m, h) {
                (Some(m), Some(h)) => format!("{:+.1}%", (h / m - 1.0) * 100.0),
                _ => "-".into(),
            };
            println!("| {bytes} | {} | {} | {overhead} |", fmt_us(m), fmt_us(h));
        }
    }
    Ok(())
}
