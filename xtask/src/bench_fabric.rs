//! The libfabric part of `cargo xtask bench-peers`: hvd's RDMA transport over the
//! `tcp;ofi_rxm` and `shm` providers, beside hvd's own TCP and shared memory and Open MPI
//! over libfabric (`--mca pml cm --mca mtl ofi`), in one run.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::measure::{
    JsonLines, Series, Sweep, add, fmt_us, hvd_rows, median, mpi_rows, run_capture, speedup,
};

/// Whether libfabric is installed (its `fi_info` runs).
pub(crate) fn available() -> bool {
    Command::new("fi_info")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn mpirun_ofi(np: usize) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args([
            "--oversubscribe",
            "--mca",
            "pml",
            "cm",
            "--mca",
            "mtl",
            "ofi",
        ])
        .args(["-np", &np.to_string()]);
    cmd
}

/// Runs and prints the libfabric table for `np` ranks (and writes its medians to `json`);
/// `tcp` and `shm` are hvd's own transports' series from the same run.
pub(crate) fn table(
    sweep: &Sweep<'_>,
    mpi_allreduce: Option<&Path>,
    (tcp, shm): (&Series, &Series),
    json: Option<&mut JsonLines>,
) -> Result<(), String> {
    let (bench, np, repeats) = (sweep.bench, sweep.np, sweep.repeats);
    let size_list = sweep.size_args();
    let (mut rdma_tcp, mut rdma_shm, mut ompi) = (Series::new(), Series::new(), Series::new());
    for _ in 0..repeats {
        for (series, provider) in [(&mut rdma_tcp, "tcp;ofi_rxm"), (&mut rdma_shm, "shm")] {
            let out = run_capture(
                Command::new(bench)
                    .args(["allreduce", "--backend", "rdma", "--np", &np.to_string()])
                    .args(["--sizes", &size_list.join(","), "--json"])
                    .env("HVD_RDMA_PROVIDER", provider),
            )?;
            add(series, hvd_rows(&out));
        }
        if let Some(bin) = mpi_allreduce {
            add(
                &mut ompi,
                mpi_rows(
                    &run_capture(mpirun_ofi(np).arg(bin).args(&size_list))?,
                    1,
                    4,
                ),
            );
        }
    }
    if let Some(json) = json {
        for (implementation, series) in [
            ("hvd rdma tcp;ofi_rxm", &rdma_tcp),
            ("hvd rdma shm", &rdma_shm),
            ("Open MPI libfabric (cm/ofi)", &ompi),
        ] {
            json.write("allreduce", np, implementation, series)?;
        }
    }
    println!(
        "\n### allreduce over libfabric, f32 sum, {np} ranks (median of {repeats} runs; ratio = other time / hvd rdma time)\n"
    );
    println!(
        "| size | hvd rdma tcp;ofi_rxm | hvd TCP | ratio | hvd rdma shm | hvd shm | ratio | Open MPI cm/ofi | ratio vs rdma shm |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for bytes in sweep.sizes {
        let m = |s: &Series| s.get(bytes).and_then(|v| median(v));
        let (rt, rs) = (m(&rdma_tcp), m(&rdma_shm));
        println!(
            "| {bytes} | {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_us(rt),
            fmt_us(m(tcp)),
            speedup(m(tcp), rt),
            fmt_us(rs),
            fmt_us(m(shm)),
            speedup(m(shm), rs),
            fmt_us(m(&ompi)),
            speedup(m(&ompi), rs)
        );
    }
    Ok(())
}
