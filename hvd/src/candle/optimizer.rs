//! Horovod's DistributedOptimizer for candle: any `candle_nn::Optimizer`, stepping with
//! gradients averaged across ranks.

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use candle_nn::{Optimizer, VarMap};
use hvd_core::{Compression, Error, ReduceOp, Reduction};

use super::{check_unique_names, hvd_error, named_vars, tensor_buffer};
use crate::ProcessSet;

/// Wraps a candle optimizer so that every step uses the gradients averaged over the ranks
/// of a process set: data parallelism with the same global batch computes what one rank
/// would.
///
/// Each parameter's gradient is one named allreduce (`grad.<parameter name>`), and all of
/// them are submitted before the first wait, so Tensor Fusion packs them into few
/// transfers. A parameter without a gradient on this rank contributes zeros (every rank
/// must submit every name), as in Horovod.
///
/// With [`backward_passes_per_step`](Self::backward_passes_per_step) `n`, the gradients
/// of `n` passes are summed locally (as PyTorch accumulates them) and averaged across
/// ranks only on the `n`-th, which then steps the optimizer: scale the loss by `1 / n`
/// for the mean over the micro-batches.
#[derive(Debug)]
pub struct DistributedOptimizer<O> {
    inner: O,
    set: ProcessSet,
    /// Each parameter with the name its gradient is reduced under (`grad.<name>`).
    params: Vec<(String, Var)>,
    op: ReduceOp,
    /// How gradients travel; `None` follows the configuration (`HVD_COMPRESSION`).
    compression: Option<Compression>,
    backward_passes_per_step: usize,
    /// Backward passes accumulated since the last step.
    passes: usize,
    /// Their summed gradients, one slot per parameter.
    accumulated: Vec<Option<Tensor>>,
}

impl<O: Optimizer> DistributedOptimizer<O> {
    /// Wraps `inner`, built over the variables of `varmap`; gradients are named after the
    /// varmap's names and averaged over `set` (`&hvd` for the whole job).
    pub fn new(set: &ProcessSet, inner: O, varmap: &VarMap) -> candle_core::Result<Self> {
        Self::with_named_vars(set, inner, named_vars(varmap)?)
    }

    /// Wraps `inner` over explicitly named variables. Every rank must give the same
    /// names (the order may differ).
    pub fn with_named_vars(
        set: &ProcessSet,
        inner: O,
        params: Vec<(String, Var)>,
    ) -> candle_core::Result<Self> {
        check_unique_names("allreduce", set, &params)?;
        let params: Vec<(String, Var)> = params
            .into_iter()
            .filter(|(_, var)| var.dtype().is_float())
            .map(|(name, var)| (format!("grad.{name}"), var))
            .collect();
        Ok(DistributedOptimizer {
            inner,
            set: set.clone(),
            accumulated: vec![None; params.len()],
            params,
            op: ReduceOp::Average,
            compression: None,
            backward_passes_per_step: 1,
            passes: 0,
        })
    }

    /// Accumulates the gradients of `n` backward passes (at least 1) before each
    /// allreduce and step.
    pub fn backward_passes_per_step(mut self, n: usize) -> candle_core::Result<Self> {
        if n == 0 {
            return Err(hvd_error(Error::Config {
                name: "backward_passes_per_step".into(),
                value: "0".into(),
                expected: "at least 1".into(),
            }));
        }
        self.backward_passes_per_step = n;
        Ok(self)
    }

    /// How gradients are combined across ranks: [`ReduceOp::Average`] (the default) or
    /// [`ReduceOp::Sum`].
    pub fn op(mut self, op: ReduceOp) -> candle_core::Result<Self> {
        if !matches!(op, ReduceOp::Average | ReduceOp::Sum) {
            return Err(hvd_error(Error::Config {
                name: "DistributedOptimizer op".into(),
                value: format!("{op:?}"),
                expected: "Average or Sum".into(),
            }));
        }
        self.op = op;
        Ok(self)
    }

    /// Sends f32 and f64 gradients as 16-bit floats and widens the averages back
    /// (Horovod's `compression=hvd.Compression.fp16`): half the bytes on the wire, at
    /// the wire type's precision. Without this the configuration decides
    /// (`HVD_COMPRESSION`, default none). Every rank must choose the same.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// Back-propagates `loss` and hands the gradients to [`step`](Self::step); returns
    /// whether the parameters were updated.
    pub fn backward_step(&mut self, loss: &Tensor) -> candle_core::Result<bool> {
        self.step(&loss.backward()?)
    }

    /// Adds this backward pass's gradients; on every `backward_passes_per_step`-th call,
    /// averages the accumulated gradients across ranks and steps the wrapped optimizer.
    /// Returns whether the parameters were updated.
    pub fn step(&mut self, grads: &GradStore) -> candle_core::Result<bool> {
        for ((_, var), sum) in self.params.iter().zip(&mut self.accumulated) {
            if let Some(grad) = grads.get(var) {
                let grad = grad.detach();
                *sum = Some(match sum.take() {
                    Some(previous) => previous.add(&grad)?,
                    None => grad,
                });
            }
        }
        self.passes += 1;
        if self.passes < self.backward_passes_per_step {
            return Ok(false);
        }
        let summed = self.accumulated.iter_mut().map(Option::take).collect();
        self.passes = 0;
        let averaged = self.allreduce(summed)?;
        self.inner.step(&averaged)?;
        Ok(true)
    }

    /// Combines `grads` across ranks (every parameter submitted before any wait) and
    /// returns them as a gradient store for the wrapped optimizer, without stepping.
    /// Useful to clip or inspect the averaged gradients; every rank must call it.
    pub fn average_gradients(&self, grads: &GradStore) -> candle_core::Result<GradStore> {
        self.allreduce(
            self.params
                .iter()
                .map(|(_, var)| grads.get(var).cloned())
                .collect(),
        )
    }

    fn allreduce(&self, grads: Vec<Option<Tensor>>) -> candle_core::Result<GradStore> {
        let mut handles = Vec::with_capacity(self.params.len());
        for ((name, var), grad) in self.params.iter().zip(grads) {
            let grad = match grad {
                Some(grad) => grad,
                None => var.zeros_like()?,
            };
            // Compression narrows on the host: compressed gradients travel through it.
            let on_device = self.compression.is_none();
            let buffer = tensor_buffer(&self.set, "allreduce", name, &grad, on_device)?;
            let reduction = Reduction::new(self.op);
            let handle = match self.compression {
                Some(c) => self
                    .set
                    .allreduce_compressed_async(name, buffer, reduction, c),
                None => self.set.allreduce_with_async(name, buffer, reduction),
            }
            .map_err(hvd_error)?;
            handles.push((var, handle));
        }
        let mut store = GradStore::default();
        for (var, handle) in handles {
            let combined = handle.wait().map_err(hvd_error)?;
            store.insert(var, combined.into_tensor(var.device())?);
        }
        Ok(store)
    }

    pub fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    pub fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr)
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut O {
        &mut self.inner
    }

    pub fn into_inner(self) -> O {
        self.inner
    }
}
