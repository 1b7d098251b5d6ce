//! `hvd-bench autotune`: does the autotuner end near the best parameters? Runs the fusion
//! workload with `HVD_AUTOTUNE` until the tuner settles, measures the step time it
//! settled on, then measures a grid of fixed (fusion threshold, cycle time) points in the
//! same run.

use std::sync::Arc;
use std::time::Duration;

use hvd::{Collective, Config, Hvd, Result};

use crate::fusion::step_time;

const THRESHOLDS: [usize; 5] = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20];
const CYCLES_MS: [f64; 4] = [0.5, 1.0, 5.0, 25.0];

fn with_params(transport: &Arc<dyn Collective>, config: Config) -> Result<Hvd> {
    Hvd::builder()
        .collective(transport.clone())
        .config(config)
        .build()
}

/// Steps of `tensors` x `bytes` with autotuning until it settles (at most `max_steps`),
/// then the median step time at the chosen point.
fn tuned(
    transport: &Arc<dyn Collective>,
    tensors: usize,
    elements: usize,
    iters: usize,
    max_steps: usize,
) -> Result<(f64, u64, u64, usize)> {
    let config = Config {
        autotune: true,
        ..Config::from_env()?
    };
    let hvd = with_params(transport, config)?;
    let mut steps = 0;
    let mut unchanged = 0;
    let mut last = hvd.stats();
    // Settled: the parameters have not moved for 40 steps (the tuner needs about 6 steps
    // per point, so that is well past its last point).
    while steps < max_steps && unchanged < 40 {
        step_time(&hvd, tensors, elements, true, 1)?;
        let now = hvd.stats();
        let same = (now.fusion_threshold, now.cycle_time_us)
            == (last.fusion_threshold, last.cycle_time_us);
        unchanged = if same { unchanged + 1 } else { 0 };
        last = now;
        steps += 3;
    }
    let micros = step_time(&hvd, tensors, elements, true, iters)?;
    hvd.shutdown();
    Ok((micros, last.fusion_threshold, last.cycle_time_us, steps))
}

pub fn run(
    transport: Arc<dyn Collective>,
    tensors: usize,
    bytes: usize,
    iters: usize,
) -> Result<()> {
    let rank = transport.topology().rank();
    let elements = (bytes / 4).max(1);
    let (tuned_us, threshold, cycle_us, steps) = tuned(&transport, tensors, elements, iters, 2000)?;
    let mut grid = Vec::new();
    for threshold in THRESHOLDS {
        for cycle_ms in CYCLES_MS {
            let config = Config {
                fusion_threshold: threshold,
                cycle_time: Duration::from_secs_f64(cycle_ms / 1e3),
                ..Config::from_env()?
            };
            let hvd = with_params(&transport, config)?;
            let micros = step_time(&hvd, tensors, elements, true, iters)?;
            hvd.shutdown();
            grid.push((threshold, cycle_ms, micros));
        }
    }
    if rank != 0 {
        return Ok(());
    }
    println!(
        "# hvd-bench autotune  {tensors} tensors x {bytes} bytes per step  (median step of the slowest rank)"
    );
    println!("# grid point: fusion threshold, cycle time -> step time");
    for (threshold, cycle_ms, micros) in &grid {
        println!(
            "  {:>6} MiB {cycle_ms:>6.1} ms  {:>10.3} ms",
            threshold >> 20,
            micros / 1e3
        );
    }
    let (best_threshold, best_cycle, best_us) = grid
        .iter()
        .copied()
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .unwrap_or((0, 0.0, f64::NAN));
    println!(
        "# autotuned after {steps} steps: {} MiB, {:.2} ms -> {:.3} ms per step",
        threshold >> 20,
        cycle_us as f64 / 1e3,
        tuned_us / 1e3
    );
    println!(
        "# best grid point: {} MiB, {best_cycle:.1} ms -> {:.3} ms per step; autotuned is {:.1}% slower",
        best_threshold >> 20,
        best_us / 1e3,
        (tuned_us / best_us - 1.0) * 100.0
    );
    Ok(())
}
