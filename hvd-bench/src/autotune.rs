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
    hvd::Builder::new()
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

/// Median step time of `config`, over a fresh runtime.
fn measure(
    transport: &Arc<dyn Collective>,
    config: Config,
    tensors: usize,
    elements: usize,
    iters: usize,
) -> Result<f64> {
    let hvd = with_params(transport, config)?;
    let micros = step_time(&hvd, tensors, elements, true, iters)?;
    hvd.shutdown();
    Ok(micros)
}

fn fixed(threshold: usize, cycle: Duration) -> Result<Config> {
    Ok(Config {
        fusion_threshold: threshold,
        cycle_time: cycle,
        ..Config::from_env()?
    })
}

/// Tunes, then measures the tuned point and every grid point the same way, `repeats`
/// times interleaved (run-to-run noise on a small machine is larger than the effects),
/// and compares medians.
pub fn run(
    transport: Arc<dyn Collective>,
    tensors: usize,
    bytes: usize,
    iters: usize,
    repeats: usize,
) -> Result<()> {
    let rank = transport.topology().rank();
    let elements = (bytes / 4).max(1);
    let (_, threshold, cycle_us, steps) = tuned(&transport, tensors, elements, iters, 2000)?;
    let tuned_point = (threshold as usize, Duration::from_micros(cycle_us));
    let mut points = vec![tuned_point];
    for threshold in THRESHOLDS {
        for cycle_ms in CYCLES_MS {
            points.push((threshold, Duration::from_secs_f64(cycle_ms / 1e3)));
        }
    }
    let mut times = vec![Vec::new(); points.len()];
    for _ in 0..repeats.max(1) {
        for (point, samples) in points.iter().zip(times.iter_mut()) {
            samples.push(measure(
                &transport,
                fixed(point.0, point.1)?,
                tensors,
                elements,
                iters,
            )?);
        }
    }
    if rank != 0 {
        return Ok(());
    }
    let median = |v: &Vec<f64>| crate::median(v);
    println!(
        "# hvd-bench autotune  {tensors} tensors x {bytes} bytes per step  (median over {repeats} interleaved runs of each run's median step)"
    );
    println!("# fusion threshold, cycle time -> step time");
    for (i, (point, samples)) in points.iter().zip(&times).enumerate() {
        let label = if i == 0 { "  <- autotuned" } else { "" };
        println!(
            "  {:>6} MiB {:>6.2} ms  {:>10.3} ms{label}",
            point.0 >> 20,
            point.1.as_secs_f64() * 1e3,
            median(samples) / 1e3
        );
    }
    let tuned_us = median(&times[0]);
    let (best, best_us) = points[1..]
        .iter()
        .zip(&times[1..])
        .map(|(p, t)| (*p, median(t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((tuned_point, f64::NAN));
    println!(
        "# autotuned after {steps} steps to {} MiB, {:.2} ms: {:.3} ms per step; best grid point {} MiB, {:.2} ms: {:.3} ms; autotuned is {:+.1}%",
        tuned_point.0 >> 20,
        tuned_point.1.as_secs_f64() * 1e3,
        tuned_us / 1e3,
        best.0 >> 20,
        best.1.as_secs_f64() * 1e3,
        best_us / 1e3,
        (tuned_us / best_us - 1.0) * 100.0
    );
    Ok(())
}
