//! The model: a multi-layer perceptron, 784 → 128 (ReLU) → 10.

use candle_core::{Module, Result, Tensor};
use candle_nn::{Linear, VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::data::{CLASSES, PIXELS};

const HIDDEN: usize = 128;

pub struct Mlp {
    hidden: Linear,
    output: Linear,
}

impl Mlp {
    pub fn new(vb: VarBuilder) -> Result<Self> {
        Ok(Mlp {
            hidden: candle_nn::linear(PIXELS, HIDDEN, vb.pp("hidden"))?,
            output: candle_nn::linear(HIDDEN, CLASSES, vb.pp("output"))?,
        })
    }
}

impl Module for Mlp {
    fn forward(&self, images: &Tensor) -> Result<Tensor> {
        self.output.forward(&self.hidden.forward(images)?.relu()?)
    }
}

/// Sets every weight uniformly in ±1/√fan_in and every bias to 0, from `seed`: runs
/// with the same seed start from the same model.
pub fn initialize(varmap: &VarMap, seed: u64) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    for (_, var) in hvd::candle::named_vars(varmap)? {
        let dims = var.dims().to_vec();
        let value = match dims[..] {
            [_, fan_in] => {
                let bound = 1.0 / (fan_in as f32).sqrt();
                let values = (0..var.elem_count())
                    .map(|_| rng.random_range(-bound..bound))
                    .collect();
                Tensor::from_vec(values, dims, var.device())?
            }
            _ => var.zeros_like()?,
        };
        var.set(&value)?;
    }
    Ok(())
}
