//! What hvd's MPI transport adds to the `MPI_Allreduce` it calls.
//!
//! Plain `MPI_Allreduce` (in place, f32 sum, on `MPI_COMM_WORLD`) and
//! `MpiCollective::allreduce` run alternately, iteration by iteration, on the same buffer,
//! so that the load of a shared machine hits both alike. Each iteration is `barrier; t0;
//! op; t1`; its time is the slowest rank's. A size reports both medians, and the median
//! over iterations of hvd's time over plain MPI's time in the same iteration, which drift
//! in the machine's load cannot bias.
//!
//! ```text
//! cargo build --release -p hvd-mpi --features mpi --example mpi_overhead
//! mpirun -np 2 target/release/examples/mpi_overhead 1M 4M 16M 64M
//! ```

use std::os::raw::{c_int, c_void};
use std::time::Instant;

use hvd_core::units::parse_bytes;
use hvd_core::{Collective, ReduceOp, Reduction, Result, TensorMut};
use hvd_mpi::{MpiCollective, MpiConfig};
use mpi::ffi;

unsafe extern "C" {
    /// `MPI_IN_PLACE`, from hvd-mpi's C shim.
    fn hvd_mpi_in_place() -> *mut c_void;
}

fn main() -> Result<()> {
    let group = MpiCollective::world(MpiConfig::from_env()?)?;
    let sizes: Vec<String> = std::env::args().skip(1).collect();
    let sizes = if sizes.is_empty() {
        vec!["1M".into(), "4M".into(), "16M".into(), "64M".into()]
    } else {
        sizes
    };
    let rank = group.topology().rank();
    if rank == 0 {
        println!("# bytes iters mpi_median_us hvd_median_us overhead_pct paired_overhead_pct");
    }
    for size in &sizes {
        let bytes = parse_bytes("size", size)?;
        let iters = match bytes {
            0..=1_048_576 => 200,
            1_048_577..=16_777_216 => 60,
            _ => 40,
        };
        let m = measure(&group, bytes / 4, iters)?;
        if rank == 0 {
            println!(
                "RES {bytes} {iters} {:.1} {:.1} {:+.2} {:+.2}",
                m.raw,
                m.hvd,
                (m.hvd / m.raw - 1.0) * 100.0,
                (m.paired - 1.0) * 100.0
            );
        }
    }
    Ok(())
}

/// Medians (microseconds, slowest rank per iteration) of plain MPI and of hvd, and the
/// median ratio of hvd's time to MPI's within an iteration.
struct Medians {
    raw: f64,
    hvd: f64,
    paired: f64,
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    hvd_core::summary::median(&values.collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

fn measure(group: &MpiCollective, count: usize, iters: usize) -> Result<Medians> {
    let mut data = vec![1e-3f32; count];
    let sum = Reduction::new(ReduceOp::Sum);
    let mut times = vec![0.0f64; 2 * iters];
    for i in 0..iters + 3 {
        for hvd_first in [i % 2 == 0, i % 2 != 0] {
            group.barrier()?;
            let start = Instant::now();
            if hvd_first {
                group.allreduce(&mut [TensorMut::from_slice("overhead", &mut data)], sum)?;
            } else {
                // SAFETY: `data` holds `count` f32s, reduced in place on the world group.
                unsafe {
                    ffi::MPI_Allreduce(
                        hvd_mpi_in_place(),
                        data.as_mut_ptr().cast(),
                        count as c_int,
                        ffi::RSMPI_FLOAT,
                        ffi::RSMPI_SUM,
                        ffi::RSMPI_COMM_WORLD,
                    )
                };
            }
            let us = start.elapsed().as_secs_f64() * 1e6;
            // The first 3 pairs warm up.
            if let Some(slot) = i.checked_sub(3) {
                times[2 * slot + usize::from(hvd_first)] = us;
            }
        }
    }
    group.allreduce(
        &mut [TensorMut::from_slice("overhead.times", &mut times)],
        Reduction::new(ReduceOp::Max),
    )?;
    let pairs = times.chunks_exact(2);
    Ok(Medians {
        raw: median(pairs.clone().map(|p| p[0])),
        hvd: median(pairs.clone().map(|p| p[1])),
        paired: median(pairs.map(|p| p[1] / p[0])),
    })
}
