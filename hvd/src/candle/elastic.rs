//! [`CandleState`]: the state of an elastic candle job.

use candle_core::{Tensor, Var};
use candle_nn::VarMap;
use hvd_core::{Error, Result};

use super::{broadcast_vars, named_vars};
use crate::Hvd;
use crate::elastic::{State, TensorState};

/// What an elastic candle job keeps across rounds (see [`crate::elastic`]): the model's
/// variables, and a [`TensorState`] for the rest (the sampler's place, step counts).
///
/// A commit copies every variable; a restore sets them back; a sync broadcasts them
/// from the rank with the newest commit. With [`candle_nn::SGD`], which keeps no state,
/// that is the whole training state and recovery is exact. candle's `AdamW` keeps its
/// moments and step count private (no accessor reads or sets them), so they cannot be
/// saved or sent: after a restore they still hold the updates since the commit, and a
/// newcomer starts them at zero. An optimizer that keeps its state in `Var`s can have
/// them kept too, with [`CandleState::with_vars`].
#[derive(Debug)]
pub struct CandleState {
    vars: Vec<(String, Var)>,
    saved: Vec<Tensor>,
    /// Everything else the job keeps.
    pub extra: TensorState,
}

impl CandleState {
    /// The variables of `varmap`.
    pub fn new(varmap: &VarMap) -> candle_core::Result<CandleState> {
        Ok(CandleState::with_vars(named_vars(varmap)?))
    }

    /// These named variables (a model's, and an optimizer's state kept in `Var`s): the
    /// same names, shapes and dtypes on every rank.
    pub fn with_vars(vars: Vec<(String, Var)>) -> CandleState {
        CandleState {
            vars,
            saved: Vec::new(),
            extra: TensorState::new(),
        }
    }
}

fn candle_failed(what: String, e: candle_core::Error) -> Error {
    Error::Io {
        context: what,
        message: e.to_string(),
        kind: std::io::ErrorKind::Other,
    }
}

impl State for CandleState {
    fn save(&mut self) -> Result<()> {
        self.saved = self
            .vars
            .iter()
            .map(|(name, var)| {
                var.as_tensor()
                    .copy()
                    .map_err(|e| candle_failed(format!("elastic state: saving '{name}'"), e))
            })
            .collect::<Result<_>>()?;
        self.extra.save()
    }

    fn restore(&mut self) -> Result<()> {
        for ((name, var), saved) in self.vars.iter().zip(&self.saved) {
            var.set(saved)
                .map_err(|e| candle_failed(format!("elastic state: restoring '{name}'"), e))?;
        }
        self.extra.restore()
    }

    fn sync(&mut self, hvd: &Hvd, root: usize) -> Result<()> {
        let named: Vec<(String, Var)> = self
            .vars
            .iter()
            .map(|(name, var)| (format!("hvd.elastic.var.{name}"), var.clone()))
            .collect();
        broadcast_vars(hvd, &named, root)
            .map_err(|e| candle_failed("elastic state: syncing the variables".into(), e))?;
        self.extra.sync(hvd, root)
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};

    use super::*;

    #[test]
    fn restore_sets_the_variables_back_to_the_last_commit() -> candle_core::Result<()> {
        let varmap = VarMap::new();
        let w = varmap.get(
            (2,),
            "w",
            candle_nn::Init::Const(1.0),
            DType::F32,
            &Device::Cpu,
        )?;
        let mut state = CandleState::new(&varmap)?;
        state.extra.set_u64("step", 4);
        state.save().map_err(candle_core::Error::wrap)?;
        let var = &state.vars[0].1;
        var.set(&Tensor::new(&[5f32, 6.0], &Device::Cpu)?)?;
        state.extra.set_u64("step", 9);
        state.restore().map_err(candle_core::Error::wrap)?;
        assert_eq!(w.to_vec1::<f32>()?, [1.0, 1.0]);
        assert_eq!(state.extra.get_u64("step"), Some(4));
        Ok(())
    }
}
