//! `hvd-bench fusion`: many small tensors through the full runtime with Tensor Fusion on
//! and off, next to the same bytes as one tensor (peers/torch_gloo_bench.py's
//! many-small-tensors test, run through hvd).

use std::sync::Arc;
use std::time::Instant;

use hvd::{Buffer, Collective, Config, Hvd, ReduceOp, Result};

use crate::device::Device;

/// One variant of the experiment.
struct Variant {
    name: &'static str,
    fusion_threshold: usize,
    /// Submit `tensors` tensors (true) or their bytes as one tensor (false).
    split: bool,
    /// Record the Timeline meanwhile.
    timeline: bool,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        name: "fusion off",
        fusion_threshold: 0,
        split: true,
        timeline: false,
    },
    Variant {
        name: "fusion on",
        fusion_threshold: 128 << 20,
        split: true,
        timeline: false,
    },
    Variant {
        name: "one tensor",
        fusion_threshold: 128 << 20,
        split: false,
        timeline: false,
    },
    Variant {
        name: "on+timeline",
        fusion_threshold: 128 << 20,
        split: true,
        timeline: true,
    },
];

/// Where the timeline variant writes its trace (removed afterwards).
fn trace_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("hvd-bench-fusion-{}.json", std::process::id()))
}

/// Times one step (submit every tensor, wait for all) `iters` times; returns the slowest
/// rank's median in microseconds.
pub fn step_time(
    hvd: &Hvd,
    tensors: usize,
    elements: usize,
    split: bool,
    iters: usize,
) -> Result<f64> {
    timed_steps(hvd, tensors, elements, split, iters, |len| {
        Ok(vec![1e-3f32; len])
    })
}

/// [`step_time`] over tensors that `make` creates with a given number of elements.
fn timed_steps<B: Buffer>(
    hvd: &Hvd,
    tensors: usize,
    elements: usize,
    split: bool,
    iters: usize,
    make: impl Fn(usize) -> Result<B>,
) -> Result<f64> {
    let (count, len) = if split {
        (tensors, elements)
    } else {
        (1, tensors * elements)
    };
    let names: Vec<String> = (0..count).map(|i| format!("grad.{i}")).collect();
    let mut held: Vec<B> = (0..count).map(|_| make(len)).collect::<Result<_>>()?;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters + 2 {
        hvd.barrier()?;
        let start = Instant::now();
        let handles = names
            .iter()
            .zip(std::mem::take(&mut held))
            .map(|(n, t)| hvd.allreduce_async(n, t, ReduceOp::Average))
            .collect::<Result<Vec<_>>>()?;
        held = handles
            .into_iter()
            .map(|h| h.wait())
            .collect::<Result<_>>()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    // The first two steps negotiate and warm up; they are not timed.
    let mut slowest = hvd.allreduce("bench.times", times.split_off(2), ReduceOp::Max)?;
    slowest.sort_by(f64::total_cmp);
    Ok(slowest[slowest.len() / 2])
}

/// [`step_time`] with the tensors in the memory of `device`.
#[cfg(feature = "nccl")]
fn device_step_time(
    hvd: &Hvd,
    device: &Device,
    tensors: usize,
    elements: usize,
    split: bool,
    iters: usize,
) -> Result<f64> {
    timed_steps(hvd, tensors, elements, split, iters, |len| {
        hvd::device::DeviceVec::from_slice(&device.memory, &vec![1e-3f32; len])
    })
}

#[cfg(not(feature = "nccl"))]
fn device_step_time(_: &Hvd, _: &Device, _: usize, _: usize, _: bool, _: usize) -> Result<f64> {
    Err(hvd::Error::Unsupported {
        backend: "hvd-bench",
        what: "device tensors in a build without the nccl feature".into(),
    })
}

/// Runs every variant over `transport`, with tensors on the device of `device` when
/// given; rank 0 prints the table.
pub fn run(
    transport: Arc<dyn Collective>,
    device: Option<Device>,
    tensors: usize,
    bytes: usize,
    iters: usize,
    json: bool,
) -> Result<()> {
    let (rank, np) = (transport.topology().rank(), transport.topology().size());
    let elements = (bytes / 4).max(1);
    let mut rows = Vec::new();
    for variant in &VARIANTS {
        let config = Config {
            fusion_threshold: variant.fusion_threshold,
            timeline: variant.timeline.then(trace_path),
            ..Config::from_env()?
        };
        let mut builder = hvd::Builder::new()
            .collective(transport.clone())
            .config(config);
        if let Some(device) = &device {
            builder = builder.device_collective(device.collective.clone());
        }
        let hvd = builder.build()?;
        let micros = match &device {
            None => step_time(&hvd, tensors, elements, variant.split, iters)?,
            Some(device) => {
                device_step_time(&hvd, device, tensors, elements, variant.split, iters)?
            }
        };
        hvd.shutdown();
        if variant.timeline {
            let _ = std::fs::remove_file(trace_path());
        }
        rows.push((variant.name, micros));
    }
    if rank != 0 {
        return Ok(());
    }
    let total = tensors * elements * 4;
    let single = rows[2].1;
    if !json {
        println!(
            "# hvd-bench fusion  np {np}  {tensors} tensors x {bytes} bytes = {total} bytes per step, f32 average  (median step of the slowest rank)"
        );
        println!(
            "# {:<12} {:>12} {:>12} {:>16}",
            "variant", "step(ms)", "algbw(GB/s)", "vs one tensor"
        );
    }
    for (name, micros) in rows {
        let algbw = total as f64 / (micros * 1e-6) / 1e9;
        if json {
            println!(
                "{{\"op\":\"fusion\",\"variant\":\"{name}\",\"np\":{np},\"tensors\":{tensors},\"bytes\":{total},\"time_us_median\":{micros:.3},\"algbw_gbps\":{algbw:.4},\"vs_one_tensor\":{:.3}}}",
                micros / single
            );
        } else {
            println!(
                "  {name:<12} {:>12.3} {algbw:>12.3} {:>15.2}x",
                micros / 1e3,
                micros / single
            );
        }
    }
    Ok(())
}
