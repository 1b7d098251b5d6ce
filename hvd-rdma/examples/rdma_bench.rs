//! Times allreduce over a libfabric provider with ranks as processes on this machine, to
//! compare with `hvd-gloo-tcp`'s `tcp_bench` and with Open MPI.
//!
//! ```text
//! cargo run --release -p hvd-rdma --example rdma_bench -- [ranks] [provider] [sizes...]
//! cargo run --release -p hvd-rdma --example rdma_bench -- 2 shm 4K 1M 64M
//! ```
//! `provider` defaults to `HVD_RDMA_PROVIDER` or the preferred one; sizes are bytes of
//! f32 data, default 4K 64K 1M 16M 64M. `HVD_BENCH_CHUNK` overrides `chunk_bytes`.
//! Each iteration is timed between a barrier and the end of the call; the time of an
//! iteration is the slowest rank's, and the table shows the median over iterations with
//! nccl-tests' algbw (bytes / time) and busbw (`2 (n - 1) / n` of that).

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use hvd_core::store::FileStore;
use hvd_core::units::{format_bytes, parse_bytes};
use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};
use hvd_rdma::{RdmaCollective, RdmaConfig};

const RANK: &str = "HVD_BENCH_RANK";
const DIR: &str = "HVD_BENCH_DIR";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ranks: usize = args.first().map_or(Ok(2), |a| a.parse())?;
    let provider = args.get(1).filter(|p| !p.is_empty()).cloned();
    let sizes: Vec<usize> = if args.len() > 2 {
        args[2..]
            .iter()
            .map(|s| parse_bytes("size", s))
            .collect::<Result<_, _>>()?
    } else {
        ["4K", "64K", "1M", "16M", "64M"]
            .iter()
            .map(|s| parse_bytes("size", s))
            .collect::<Result<_, _>>()?
    };
    match std::env::var(RANK) {
        Ok(rank) => run_rank(rank.parse()?, ranks, provider, &sizes),
        Err(_) => launch(ranks, &args),
    }
}

fn launch(ranks: usize, args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let children: Vec<_> = (0..ranks)
        .map(|rank| {
            Command::new(std::env::current_exe()?)
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
    provider: Option<String>,
    sizes: &[usize],
) -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(FileStore::new(std::env::var(DIR)?)?);
    let mut config = RdmaConfig::from_env()?;
    if provider.is_some() {
        config.provider = provider;
    }
    if let Ok(chunk) = std::env::var("HVD_BENCH_CHUNK") {
        config.chunk_bytes = parse_bytes("HVD_BENCH_CHUNK", &chunk)?;
    }
    let group = RdmaCollective::connect(store, rank, ranks, config)?;
    if rank == 0 {
        println!(
            "# allreduce, {ranks} ranks over {}, f32; time = median over iterations of the slowest rank",
            group.provider()
        );
        println!(
            "{:>8} {:>6} {:>12} {:>10} {:>10}",
            "size", "iters", "time", "algbw GB/s", "busbw GB/s"
        );
    }
    for &bytes in sizes {
        let iterations = ((256usize << 20) / bytes.max(1)).clamp(5, 1000);
        let mut data = vec![rank as f32; bytes / 4];
        let mut call = || {
            group.allreduce(
                &mut [TensorMut::from_slice("x", &mut data)],
                Reduction::new(ReduceOp::Sum),
            )
        };
        for _ in 0..iterations.div_ceil(10).max(2) {
            call()?;
        }
        let mut times = vec![0f64; iterations];
        for time in &mut times {
            group.barrier()?;
            let started = Instant::now();
            call()?;
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
        if rank == 0 {
            println!(
                "{:>8} {:>6} {:>12} {:>10.3} {:>10.3}",
                format_bytes(bytes),
                iterations,
                format!("{:.1} us", median * 1e6),
                algbw,
                algbw * 2.0 * (n - 1.0) / n
            );
        }
    }
    Ok(())
}
