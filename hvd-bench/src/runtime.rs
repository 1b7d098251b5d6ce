//! `hvd-bench runtime`: what the runtime (negotiation, response cache, fusion, handles)
//! costs on top of the transport, measured in one run: first the transport alone, then
//! the same tensors through the runtime over that same transport.

use std::sync::Arc;
use std::time::Instant;

use hvd::{Collective, Hvd, ReduceOp, Reduction, Result, TensorMut};

/// Slowest rank's time of each iteration, sorted, in microseconds.
fn slowest(group: &dyn Collective, mut times: Vec<f64>) -> Result<Vec<f64>> {
    group.allreduce(
        &mut [TensorMut::from_slice("bench.times", &mut times)],
        Reduction::new(ReduceOp::Max),
    )?;
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// Times `iters` runs of `op` on the bare transport (barrier; t0; op; t1).
fn transport_times(
    group: &dyn Collective,
    iters: usize,
    mut op: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        group.barrier()?;
        let start = Instant::now();
        op()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    slowest(group, times)
}

/// Times `iters` runs of `op` through the runtime.
fn runtime_times(hvd: &Hvd, iters: usize, mut op: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        hvd.barrier()?;
        let start = Instant::now();
        op()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    // The runtime owns the transport now; gather the times through the runtime too.
    let mut sorted = hvd.allreduce("bench.times", times, ReduceOp::Max)?;
    sorted.sort_by(f64::total_cmp);
    Ok(sorted)
}

/// Measures one small tensor and a cycle's worth of them; rank 0 prints the table.
pub fn run(
    transport: Arc<dyn Collective>,
    bytes: usize,
    tensors: usize,
    iters: usize,
    json: bool,
) -> Result<()> {
    let count = (bytes / 4).max(1);
    let (rank, np) = (transport.topology().rank(), transport.topology().size());
    let sum = Reduction::new(ReduceOp::Sum);

    let mut one = vec![1.0f32; count];
    let raw_one = transport_times(transport.as_ref(), iters, || {
        transport.allreduce(&mut [TensorMut::from_slice("one", &mut one)], sum)
    })?;
    let mut many: Vec<Vec<f32>> = vec![vec![1.0f32; count]; tensors];
    let raw_batch = transport_times(transport.as_ref(), iters / 10 + 1, || {
        let mut views: Vec<TensorMut<'_>> = many
            .iter_mut()
            .map(|t| TensorMut::from_slice("many", t))
            .collect();
        transport.allreduce(&mut views, sum)
    })?;

    let hvd = hvd::Builder::new().collective(transport.clone()).build()?;
    let mut tensor = Some(vec![1.0f32; count]);
    let rt_one = runtime_times(&hvd, iters, || {
        let t = tensor.take().unwrap_or_default();
        tensor = Some(hvd.allreduce("one", t, ReduceOp::Sum)?);
        Ok(())
    })?;
    let names: Vec<String> = (0..tensors).map(|i| format!("grad.{i}")).collect();
    let mut held: Vec<Option<Vec<f32>>> = vec![Some(vec![1.0f32; count]); tensors];
    let rt_batch = runtime_times(&hvd, iters / 10 + 1, || {
        let handles = names
            .iter()
            .zip(held.iter_mut())
            .map(|(n, t)| hvd.allreduce_async(n, t.take().unwrap_or_default(), ReduceOp::Sum))
            .collect::<Result<Vec<_>>>()?;
        for (slot, h) in held.iter_mut().zip(handles) {
            *slot = Some(h.wait()?);
        }
        Ok(())
    })?;
    let stats = hvd.stats();
    if rank == 0 {
        let rows = [
            (
                "one tensor",
                bytes,
                crate::median(&raw_one),
                crate::median(&rt_one),
            ),
            (
                "one cycle",
                bytes * tensors,
                crate::median(&raw_batch),
                crate::median(&rt_batch),
            ),
        ];
        if !json {
            println!(
                "# hvd-bench runtime  np {np}  {tensors} tensors of {bytes} bytes per cycle  (medians of the slowest rank)"
            );
            println!(
                "# {:<12} {:>10} {:>15} {:>15} {:>15}",
                "case", "bytes", "transport(us)", "runtime(us)", "overhead(us)"
            );
        }
        for (case, total, raw, rt) in rows {
            if json {
                println!(
                    "{{\"op\":\"runtime\",\"case\":\"{case}\",\"np\":{np},\"bytes\":{total},\"transport_us\":{raw:.3},\"runtime_us\":{rt:.3},\"overhead_us\":{:.3}}}",
                    rt - raw
                );
            } else {
                println!(
                    "  {case:<12} {total:>10} {raw:>15.2} {rt:>15.2} {:>15.2}",
                    rt - raw
                );
            }
        }
        if !json {
            println!(
                "# runtime cycles {} ({} run by the waiting caller), announcement rounds {}, response-cache hits {} ({} carried by the negotiation round)",
                stats.cycles,
                stats.caller_cycles,
                stats.announce_rounds,
                stats.cache_hits,
                stats.speculated
            );
        }
    }
    Ok(())
}
