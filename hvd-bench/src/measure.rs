//! Timing a collective the way the peer benchmarks do, so numbers compare directly:
//! every iteration is `barrier; t0; op; t1`, the time of an iteration is the slowest
//! rank's, and a size reports the median, fastest and slowest iteration.

use std::sync::Arc;
use std::time::Instant;

use hvd::core::DeviceMemory;

use hvd::{Collective, DType, ReduceOp, Reduction, Result, TensorMut};

use crate::bench_op::BenchOp;
use crate::buffers::Buffers;

/// Warmup and timed iterations for a size, as the MPI peer benchmark picks them.
pub fn default_iterations(bytes: usize) -> (usize, usize) {
    match bytes {
        0..=4096 => (200, 2000),
        4097..=65_536 => (100, 1000),
        65_537..=1_048_576 => (20, 200),
        1_048_577..=16_777_216 => (5, 30),
        16_777_217..=67_108_864 => (3, 10),
        _ => (2, 5),
    }
}

/// One row of results.
#[derive(Debug, Clone)]
pub struct Row {
    pub op: BenchOp,
    pub np: usize,
    pub bytes: usize,
    pub count: usize,
    pub dtype: DType,
    pub iters: usize,
    pub time_us_median: f64,
    pub time_us_min: f64,
    pub time_us_max: f64,
    /// `Some(true)` when the result was verified, `None` when not checked.
    pub checked: Option<bool>,
}

/// nccl-tests' algorithm bandwidth: bytes of the reported size per second, in GB/s (10^9).
pub fn algbw_gbps(bytes: usize, time_us: f64) -> f64 {
    bytes as f64 / (time_us * 1e-6) / 1e9
}

/// nccl-tests' bus bandwidth, in GB/s: the algorithm bandwidth scaled by how much of the
/// data each rank's link carries, comparable across collectives and rank counts.
pub fn busbw_gbps(op: BenchOp, np: usize, bytes: usize, time_us: f64) -> f64 {
    algbw_gbps(bytes, time_us) * op.bus_factor(np)
}

impl Row {
    pub fn algbw_gbps(&self) -> f64 {
        algbw_gbps(self.bytes, self.time_us_median)
    }

    pub fn busbw_gbps(&self) -> f64 {
        busbw_gbps(self.op, self.np, self.bytes, self.time_us_median)
    }
}

/// Settings of one measurement.
pub struct Plan {
    pub op: BenchOp,
    pub dtype: DType,
    pub reduction: Reduction,
    pub iters: Option<usize>,
    pub warmup: Option<usize>,
    pub check: bool,
    /// The device memory the buffers live in (for a device transport), else the host.
    pub memory: Option<Arc<dyn DeviceMemory>>,
}

/// Whether any rank's check failed (every rank learns it).
fn any_rank_failed(group: &dyn Collective, failed: bool) -> Result<bool> {
    let mut flag = [failed as i32];
    group.allreduce(
        &mut [TensorMut::from_slice("bench.check", &mut flag)],
        Reduction::new(ReduceOp::Max),
    )?;
    Ok(flag[0] != 0)
}

/// Measures one size; every rank returns the same row.
pub fn measure(group: &dyn Collective, plan: &Plan, bytes: usize) -> Result<Row> {
    let topology = group.topology();
    let (rank, np) = (topology.rank(), topology.size());
    let mut buffers = Buffers::new(
        plan.op,
        plan.dtype,
        plan.reduction,
        (bytes, rank, np),
        plan.memory.as_ref(),
    )?;
    let checked = if plan.check {
        buffers.run(group)?;
        let outcome = buffers.verify();
        if let Err(detail) = &outcome {
            eprintln!(
                "hvd-bench: rank {rank}: {} of {bytes} bytes gave a wrong result: {detail}",
                plan.op.name()
            );
        }
        Some(!any_rank_failed(group, outcome.is_err())?)
    } else {
        None
    };
    let (default_warmup, default_iters) = default_iterations(bytes);
    for _ in 0..plan.warmup.unwrap_or(default_warmup) {
        buffers.run(group)?;
    }
    let iters = plan.iters.unwrap_or(default_iters).max(1);
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        group.barrier()?;
        let start = Instant::now();
        buffers.run(group)?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    group.allreduce(
        &mut [TensorMut::from_slice("bench.times", &mut times)],
        Reduction::new(ReduceOp::Max),
    )?;
    times.sort_by(f64::total_cmp);
    Ok(Row {
        op: plan.op,
        np,
        bytes: buffers.reported_bytes(),
        count: buffers.reported_count(),
        dtype: plan.dtype,
        iters,
        time_us_median: crate::median(&times),
        time_us_min: times[0],
        time_us_max: times[times.len() - 1],
        checked,
    })
}
