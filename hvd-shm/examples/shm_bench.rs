//! Times shared-memory collectives with ranks as processes on this machine.
//!
//! ```text
//! cargo run --release -p hvd-shm --example shm_bench -- [ranks] [op] [sizes...]
//! cargo run --release -p hvd-shm --example shm_bench -- 2 allreduce 4K 1M 256M
//! ```
//! `op` is allreduce (default), allgather, broadcast, alltoall or reducescatter; sizes
//! are in bytes of f32 data (the allgather output, the alltoall and reducescatter
//! input), default 4K 64K 1M 16M 64M 256M. The variables of `ShmConfig::from_env`
//! (`HVD_SHM_SLOT_BYTES`, `HVD_SHM_SMALL_BYTES`) apply, and `HVD_BENCH_BUSY_POLL_US`
//! sets `busy_poll`; `HVD_BENCH_PIN=1` pins rank `r` to core `r % cores`.
//! Each iteration is timed between a barrier and the end of the call; the time of an
//! iteration is the slowest rank's, and the table shows the median over iterations with
//! nccl-tests' algbw (bytes / time) and busbw (the bytes each link carries / time).

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use hvd_core::store::FileStore;
use hvd_core::units::{format_bytes, parse_bytes};
use hvd_core::{Collective, ReduceOp, Reduction, Tensor, TensorMut};
use hvd_shm::{ShmCollective, ShmConfig};

const RANK: &str = "HVD_BENCH_RANK";
const DIR: &str = "HVD_BENCH_DIR";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ranks: usize = args.first().map_or(Ok(2), |a| a.parse())?;
    let op = args.get(1).cloned().unwrap_or_else(|| "allreduce".into());
    let sizes: Vec<usize> = if args.len() > 2 {
        args[2..]
            .iter()
            .map(|s| parse_bytes("size", s))
            .collect::<Result<_, _>>()?
    } else {
        ["4K", "64K", "1M", "16M", "64M", "256M"]
            .iter()
            .map(|s| parse_bytes("size", s))
            .collect::<Result<_, _>>()?
    };
    match std::env::var(RANK) {
        Ok(rank) => run_rank(rank.parse()?, ranks, &op, &sizes),
        Err(_) => launch(ranks, &args),
    }
}

fn launch(ranks: usize, args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let children: Vec<_> = (0..ranks)
        .map(|rank| {
            let exe = std::env::current_exe()?;
            let mut command = match std::env::var("HVD_BENCH_PIN") {
                Ok(_) => {
                    let mut pinned = Command::new("taskset");
                    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                    pinned.arg("-c").arg((rank % cores).to_string()).arg(exe);
                    pinned
                }
                Err(_) => Command::new(exe),
            };
            command
                .args(args)
                .env(RANK, rank.to_string())
                .env(DIR, dir.path())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    for mut child in children {
        let status = child.wait()?;
        if !status.success() {
            return Err(format!("a rank failed: {status}").into());
        }
    }
    Ok(())
}

fn run_rank(
    rank: usize,
    ranks: usize,
    op: &str,
    sizes: &[usize],
) -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(FileStore::new(std::env::var(DIR)?)?);
    let mut config = ShmConfig::from_env()?;
    if let Ok(micros) = std::env::var("HVD_BENCH_BUSY_POLL_US") {
        config.busy_poll = Some(std::time::Duration::from_micros(micros.parse()?));
    }
    let group = ShmCollective::connect(store, rank, ranks, config.clone())?;
    if rank == 0 {
        println!(
            "# {op}, {ranks} ranks, f32, slot {} B, small {} B; time = median over iterations of the slowest rank",
            config.slot_bytes, config.small_bytes
        );
        println!(
            "{:>8} {:>6} {:>12} {:>10} {:>10} {:>12} {:>12}",
            "size", "iters", "time", "algbw GB/s", "busbw GB/s", "p10", "p90"
        );
    }
    for &bytes in sizes {
        let iterations = ((1usize << 30) / bytes.max(1)).clamp(5, 2000);
        let mut call = Call::new(op, bytes, ranks, rank)?;
        for _ in 0..iterations.div_ceil(10).max(2) {
            call.run(&group)?;
        }
        let mut times = vec![0f64; iterations];
        for time in &mut times {
            group.barrier()?;
            let started = Instant::now();
            call.run(&group)?;
            *time = started.elapsed().as_secs_f64();
        }
        group.allreduce(
            &mut [TensorMut::from_slice("times", &mut times)],
            Reduction::new(ReduceOp::Max),
        )?;
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let algbw = bytes as f64 / median / 1e9;
        let n = ranks as f64;
        let factor = match op {
            "allreduce" => 2.0 * (n - 1.0) / n,
            "broadcast" => 1.0,
            _ => (n - 1.0) / n,
        };
        if rank == 0 {
            let percentile = |p: usize| format!("{:.1} us", times[times.len() * p / 100] * 1e6);
            println!(
                "{:>8} {:>6} {:>12} {:>10.3} {:>10.3} {:>12} {:>12}",
                format_bytes(bytes),
                iterations,
                format!("{:.1} us", median * 1e6),
                algbw,
                algbw * factor,
                percentile(10),
                percentile(90)
            );
        }
    }
    Ok(())
}

/// The buffers of one benchmarked call.
struct Call {
    op: String,
    data: Vec<f32>,
    output: Vec<f32>,
    ranks: usize,
}

impl Call {
    fn new(op: &str, bytes: usize, ranks: usize, rank: usize) -> Result<Call, String> {
        let elements = bytes / 4;
        let (input, output) = match op {
            "allreduce" | "broadcast" => (elements, 0),
            "allgather" => (elements / ranks, elements / ranks * ranks),
            "alltoall" => (elements / ranks * ranks, elements / ranks * ranks),
            "reducescatter" => (elements / ranks * ranks, elements / ranks),
            other => {
                return Err(format!(
                    "unknown op {other}: allreduce, allgather, broadcast, alltoall or reducescatter"
                ));
            }
        };
        Ok(Call {
            op: op.into(),
            data: vec![rank as f32; input],
            output: vec![0.0; output],
            ranks,
        })
    }

    fn run(&mut self, group: &ShmCollective) -> hvd_core::Result<()> {
        let n = self.ranks;
        let share = vec![self.data.len() / n; n];
        match self.op.as_str() {
            "allreduce" => group.allreduce(
                &mut [TensorMut::from_slice("x", &mut self.data)],
                Reduction::new(ReduceOp::Sum),
            ),
            "broadcast" => group.broadcast(&mut [TensorMut::from_slice("x", &mut self.data)], 0),
            "allgather" => group.allgather(
                &Tensor::from_slice("x", &self.data),
                &mut TensorMut::from_slice("x", &mut self.output),
                &vec![self.data.len(); n],
            ),
            "reducescatter" => group.reducescatter(
                &Tensor::from_slice("x", &self.data),
                &mut TensorMut::from_slice("x", &mut self.output),
                &share,
                Reduction::new(ReduceOp::Sum),
            ),
            _ => group.alltoall(
                &Tensor::from_slice("x", &self.data),
                &share,
                &mut TensorMut::from_slice("x", &mut self.output),
                &share,
            ),
        }
    }
}
