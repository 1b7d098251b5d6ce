//! Same start on every rank: a model's variables broadcast from a root.

use candle_core::Var;
use candle_nn::VarMap;

use super::{check_unique_names, hvd_error, named_vars, rank_in, tensor_buffer};
use crate::ProcessSet;

/// Sets every variable of `varmap` to `root`'s value (Horovod's
/// `broadcast_parameters`): call it on every rank after building the model, or after
/// loading a checkpoint on the root, so all ranks train the same model. Each variable is
/// the broadcast `param.<name>`.
///
/// candle's optimizers keep their state private (SGD has none; AdamW's moments start at
/// zero on every rank), so there is nothing more to broadcast at the start of training;
/// an optimizer that exposes its state as `Var`s can share it with [`broadcast_vars`].
pub fn broadcast_varmap(set: &ProcessSet, varmap: &VarMap, root: usize) -> candle_core::Result<()> {
    let vars = named_vars(varmap)?
        .into_iter()
        .map(|(name, var)| (format!("param.{name}"), var))
        .collect::<Vec<_>>();
    broadcast_vars(set, &vars, root)
}

/// Sets each named variable to `root`'s value, every broadcast submitted before any wait
/// so Tensor Fusion can pack them. The names identify the broadcasts: every rank gives
/// the same ones, with the same shapes and dtypes.
pub fn broadcast_vars(
    set: &ProcessSet,
    vars: &[(String, Var)],
    root: usize,
) -> candle_core::Result<()> {
    check_unique_names("broadcast", set, vars)?;
    let mut handles = Vec::with_capacity(vars.len());
    for (name, var) in vars {
        let buffer = tensor_buffer(set, "broadcast", name, var.as_tensor(), true)?;
        handles.push((
            var,
            set.broadcast_async(name, buffer, root).map_err(hvd_error)?,
        ));
    }
    let is_root = rank_in(set) == root;
    for (var, handle) in handles {
        let value = handle.wait().map_err(hvd_error)?;
        if !is_root {
            var.set(&value.into_tensor(var.device())?)?;
        }
    }
    Ok(())
}
