//! One rank of the synthetic benchmark: simulated batches whose gradients go through the
//! real runtime (negotiation, Tensor Fusion, transport), as a training loop with
//! Horovod's DistributedOptimizer does.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use hvd::{Collective, Compression, Config, Handle, Hvd, ReduceOp, Result};

use super::compute::ComputePlan;
use super::models::Model;
use super::options::{FusionSetting, Settings};
use super::report::Measurement;

/// Sleeps until `deadline`: compute is simulated by sleeping so that ranks sharing a few
/// cores leave them to the communication.
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}

/// The gradients of every parameter tensor, held between batches.
struct Gradients<'a> {
    names: Vec<&'a str>,
    buffers: Vec<Option<Vec<f32>>>,
    /// Each layer's tensors, as indices into `names` and `buffers`.
    layers: Vec<Range<usize>>,
}

impl<'a> Gradients<'a> {
    fn new(model: &'a Model) -> Self {
        let mut layers = Vec::with_capacity(model.layers.len());
        let mut next = 0;
        for layer in &model.layers {
            layers.push(next..next + layer.params.len());
            next += layer.params.len();
        }
        Gradients {
            names: model.params().map(|p| p.name.as_str()).collect(),
            buffers: model
                .params()
                .map(|p| Some(vec![1e-3f32; p.elements()]))
                .collect(),
            layers,
        }
    }

    /// One batch: the forward pass, then each layer's gradients submitted as the backward
    /// pass reaches them, then a wait for all of them (the optimizer's step).
    fn batch(&mut self, hvd: &Hvd, plan: &ComputePlan) -> Result<()> {
        let start = Instant::now();
        let backward = start + plan.forward;
        sleep_until(backward);
        let mut handles: Vec<(usize, Handle<Vec<f32>>)> = Vec::with_capacity(self.names.len());
        for &(layer, ready) in &plan.releases {
            sleep_until(backward + ready);
            for index in self.layers[layer].clone() {
                let buffer = self.buffers[index].take().unwrap_or_default();
                let handle = hvd.allreduce_async(self.names[index], buffer, ReduceOp::Average)?;
                handles.push((index, handle));
            }
        }
        for (index, handle) in handles {
            self.buffers[index] = Some(handle.wait()?);
        }
        Ok(())
    }
}

/// Measures one fusion and compression setting over `transport`: warm-up batches, then timed
/// iterations; every rank returns the slowest rank's images per second per iteration.
pub fn measure(
    transport: Arc<dyn Collective>,
    settings: &Settings,
    model: &Model,
    plan: &ComputePlan,
    fusion: &FusionSetting,
    compression: Compression,
) -> Result<Measurement> {
    let args = &settings.args;
    let base = Config::from_env()?;
    let config = Config {
        fusion_threshold: fusion.threshold,
        compression,
        cycle_time: settings.cycle_time.unwrap_or(base.cycle_time),
        ..base
    };
    let np = transport.topology().size();
    let hvd = hvd::Builder::new()
        .collective(transport)
        .config(config)
        .build()?;
    let mut gradients = Gradients::new(model);
    for _ in 0..args.warmup {
        gradients.batch(&hvd, plan)?;
    }
    let mut seconds = Vec::with_capacity(args.iters);
    for _ in 0..args.iters {
        let start = Instant::now();
        for _ in 0..args.batches_per_iter {
            gradients.batch(&hvd, plan)?;
        }
        seconds.push(start.elapsed().as_secs_f64());
    }
    let slowest = hvd.allreduce("bench.synthetic.seconds", seconds, ReduceOp::Max)?;
    hvd.shutdown();
    let images = (args.batch_size * args.batches_per_iter) as f64;
    Ok(Measurement {
        np,
        fusion: fusion.label.clone(),
        compression,
        images_per_sec: slowest.iter().map(|s| images / s).collect(),
    })
}
