//! The allgather, broadcast and alltoall part of `cargo xtask bench-peers`: hvd over TCP
//! beside Open MPI over TCP (`xtask/peers/mpi_collectives.c`, timed the way hvd-bench
//! times), at every size of the run, one table per collective.

use std::path::Path;
use std::process::Command;

use crate::measure::{
    JsonLines, PAIRED, Series, Sweep, add, fmt_us, hvd_rows, median, mpi_rows, mpirun,
    paired_speedup, run_capture, runs,
};

/// The collectives besides allreduce, as hvd-bench and the MPI peer name them.
const OPS: [&str; 3] = ["allgather", "broadcast", "alltoall"];

/// Runs and prints one table per collective for `np` ranks, alternating hvd and Open MPI
/// `repeats` times (and writes the medians to `json`); without `peer` (no Open MPI) the
/// peer's column is empty.
pub(crate) fn tables(
    sweep: &Sweep<'_>,
    peer: Option<&Path>,
    mut json: Option<&mut JsonLines>,
) -> Result<(), String> {
    let (bench, np, repeats) = (sweep.bench, sweep.np, sweep.repeats);
    let size_args = sweep.size_args();
    for op in OPS {
        let (mut hvd, mut ompi) = (Series::new(), Series::new());
        for _ in 0..repeats {
            let out = run_capture(
                Command::new(bench)
                    .args([op, "--backend", "tcp", "--np", &np.to_string()])
                    .args(["--sizes", &size_args.join(","), "--json"]),
            )?;
            add(&mut hvd, hvd_rows(&out));
            if let Some(bin) = peer {
                let out = run_capture(mpirun(np, "tcp,self").arg(bin).arg(op).args(&size_args))?;
                add(&mut ompi, mpi_rows(&out, 2, 5));
            }
        }
        println!(
            "\n### {op}, {np} ranks, loopback (median of {repeats} alternating runs; speed-up = Open MPI time / hvd time; {PAIRED})\n"
        );
        println!("| size | hvd TCP | Open MPI TCP | speed-up |");
        println!("|---|---|---|---|");
        for bytes in sweep.sizes {
            let m = |s: &Series| s.get(bytes).and_then(|v| median(v));
            println!(
                "| {bytes} | {} | {} | {} |",
                fmt_us(m(&hvd)),
                fmt_us(m(&ompi)),
                paired_speedup(runs(&ompi, *bytes), runs(&hvd, *bytes))
            );
        }
        if let Some(json) = json.as_deref_mut() {
            json.write(op, np, "hvd tcp", &hvd)?;
            json.write(op, np, "Open MPI TCP", &ompi)?;
        }
    }
    Ok(())
}
