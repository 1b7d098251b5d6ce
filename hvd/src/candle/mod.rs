//! Training [candle](https://github.com/huggingface/candle) models with hvd (feature
//! `candle`).
//!
//! Horovod's four steps, in candle:
//!
//! ```no_run
//! use candle_core::{DType, Device};
//! use candle_nn::{Optimizer, SGD, VarBuilder, VarMap};
//! use hvd::candle::{DistributedOptimizer, broadcast_varmap};
//!
//! # fn main() -> candle_core::Result<()> {
//! // 1. Join the job the launcher started.
//! let hvd = hvd::init().map_err(candle_core::Error::wrap)?;
//! // 2. Pin the device: one GPU per local rank (`Device::new_cuda(hvd.local_rank())`);
//! //    on a CPU, give each rank its share of the cores (`hvdrun -x RAYON_NUM_THREADS=1`).
//! let device = Device::Cpu;
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
//! let model = candle_nn::linear(784, 10, vb.pp("fc"))?;
//! // 3. Wrap the optimizer: gradients are averaged across ranks before every step.
//! let sgd = SGD::new(varmap.all_vars(), 0.1)?;
//! let mut optimizer = DistributedOptimizer::new(&hvd, sgd, &varmap)?;
//! // 4. Start every rank from rank 0's parameters.
//! broadcast_varmap(&hvd, &varmap, 0)?;
//! # let loss = candle_core::Tensor::zeros((), DType::F32, &device)?;
//! optimizer.backward_step(&loss)?;
//! # let _ = model;
//! # Ok(())
//! # }
//! ```
//!
//! What is here: [`DistributedOptimizer`] (wraps any `candle_nn::Optimizer`; one named
//! allreduce per parameter, all submitted before waiting so Tensor Fusion packs them;
//! gradient accumulation with `backward_passes_per_step`), [`broadcast_varmap`] and
//! [`broadcast_vars`] (parameters, and optimizer state where an optimizer exposes it as
//! `Var`s), [`CandleState`] (the model's state for an elastic job, see
//! [`crate::elastic`]), and, re-exported because they need no candle, [`DistributedSampler`] and the
//! [`metrics`] helpers.
//!
//! Errors are `candle_core::Error`s so they flow through a candle training loop with `?`;
//! an hvd failure is wrapped with its message intact (it names the rank, the tensor and
//! the operation).
//!
//! Tensors cross ranks in their own dtype (u8, i16, i32, i64, f16, bf16, f32, f64):
//! through host memory, or with the feature `candle-cuda`, tensors on a CUDA device as a
//! copy on that device, over NCCL (`HVD_BACKEND=nccl`) or staged through the host, after
//! the work on candle's stream (compressed gradients still go through the host: there is
//! no kernel to compress them on the device). candle's u32 and 8-bit or smaller floats
//! have no hvd equivalent and are refused with an error naming the tensor.

mod broadcast;
mod buffer;
#[cfg(feature = "candle-cuda")]
mod cuda_buffer;
mod elastic;
mod optimizer;
mod tensor_buffer;

use std::collections::HashSet;

use candle_core::Var;
use candle_nn::VarMap;

pub use crate::metrics;
pub use crate::sampler::DistributedSampler;
pub use broadcast::{broadcast_varmap, broadcast_vars};
pub use elastic::CandleState;
pub use optimizer::DistributedOptimizer;

/// The variables of `varmap` with their names, sorted by name: the same order on every
/// rank that built the same model.
pub fn named_vars(varmap: &VarMap) -> candle_core::Result<Vec<(String, Var)>> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| candle_core::Error::msg("the VarMap's lock is poisoned"))?;
    let mut vars: Vec<(String, Var)> = data
        .iter()
        .map(|(name, var)| (name.clone(), var.clone()))
        .collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(vars)
}

/// An hvd error as a candle error, message intact (without the backtrace that
/// `candle_core::Error::wrap` appends when `RUST_BACKTRACE` is set: hvd's messages name
/// the rank, tensor and operation already).
fn hvd_error(err: hvd_core::Error) -> candle_core::Error {
    candle_core::Error::Wrapped(Box::new(err))
}

/// `tensor` as a buffer for `op` of the tensor `name` (on its CUDA device when
/// `on_device` allows and the `candle-cuda` feature is on); an error naming both when
/// hvd has no dtype for it.
fn tensor_buffer(
    set: &crate::ProcessSet,
    op: &'static str,
    name: &str,
    tensor: &candle_core::Tensor,
    on_device: bool,
) -> candle_core::Result<buffer::CandleBuffer> {
    buffer::CandleBuffer::from_tensor(tensor, on_device)?.ok_or_else(|| {
        hvd_error(hvd_core::Error::invalid(
            rank_in(set),
            op,
            name,
            format!("candle dtype {:?} has no hvd equivalent", tensor.dtype()),
        ))
    })
}

/// This rank's rank in `set`, for error messages (0 when it is not a member).
fn rank_in(set: &crate::ProcessSet) -> usize {
    set.topology().map_or(0, |t| t.rank())
}

/// Refuses a list of variables in which a name appears twice: two collectives would
/// share a name.
fn check_unique_names(
    op: &'static str,
    set: &crate::ProcessSet,
    vars: &[(String, Var)],
) -> candle_core::Result<()> {
    let mut seen = HashSet::new();
    match vars.iter().find(|(name, _)| !seen.insert(name.as_str())) {
        Some((name, _)) => Err(hvd_error(hvd_core::Error::invalid(
            rank_in(set),
            op,
            name.clone(),
            "two variables have this name; every variable needs its own",
        ))),
        None => Ok(()),
    }
}
