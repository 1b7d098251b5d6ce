//! Metrics of the whole job (loss, accuracy) from what each rank measured on its shard.

use hvd_core::{ReduceOp, Result};

use crate::ProcessSet;

/// The mean of `value` over the ranks of `set` (the allreduce `metric.<name>`); every
/// rank gets it. Right for quantities every rank measured on equally many examples,
/// such as the mean training loss of shards from a [`crate::sampler::DistributedSampler`].
pub fn average(set: &ProcessSet, name: &str, value: f64) -> Result<f64> {
    Ok(set.allreduce(&format!("metric.{name}"), vec![value], ReduceOp::Average)?[0])
}

/// The element-wise sums of `values` over the ranks of `set` (the allreduce
/// `metric.<name>`). For a ratio over shards of different sizes, sum the parts: for
/// accuracy, `sum(set, "accuracy", &[correct, seen])` then `correct / seen`.
pub fn sum(set: &ProcessSet, name: &str, values: &[f64]) -> Result<Vec<f64>> {
    set.allreduce(&format!("metric.{name}"), values.to_vec(), ReduceOp::Sum)
}
