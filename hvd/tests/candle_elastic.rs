//! The elastic state of a candle job on ranks of a real job (threads over the in-process
//! reference transport, each with its own runtime and model): a sync brings every rank to
//! the root's variables and extra state, and a restore after a failed step goes back to
//! the last commit, so SGD continues as if the step had not happened.
#![cfg(feature = "candle")]

mod common;

use candle_core::{DType, Device};
use candle_nn::{Init, Optimizer, SGD, VarMap};
use hvd::candle::CandleState;
use hvd::elastic::State;

/// A varmap of two variables whose values depend on `rank`.
fn model(rank: usize) -> VarMap {
    let varmap = VarMap::new();
    let value = rank as f64 + 1.0;
    varmap
        .get((3,), "w", Init::Const(value), DType::F32, &Device::Cpu)
        .unwrap();
    varmap
        .get((2, 2), "b", Init::Const(-value), DType::F64, &Device::Cpu)
        .unwrap();
    varmap
}

fn values(varmap: &VarMap) -> (Vec<f32>, Vec<f64>) {
    let data = varmap.data().lock().unwrap();
    let w = data["w"].as_tensor().to_vec1::<f32>().unwrap();
    let b = data["b"]
        .as_tensor()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    (w, b)
}

#[test]
fn a_sync_makes_every_rank_hold_the_roots_variables_and_extra_state() {
    let results = common::job(3, common::config(), |hvd| {
        let varmap = model(hvd.rank());
        let mut state = CandleState::new(&varmap).unwrap();
        state.extra.set_u64("step", 10 * hvd.rank() as u64);
        state.sync(&hvd, 1).unwrap();
        (values(&varmap), state.extra.get_u64("step"))
    });
    for ((w, b), step) in results {
        assert_eq!(w, [2.0; 3]);
        assert_eq!(b, [-2.0; 4]);
        assert_eq!(step, Some(10));
    }
}

#[test]
fn a_restore_after_a_failed_step_lets_sgd_go_on_as_if_it_never_happened() {
    let results = common::job(2, common::config(), |hvd| {
        let varmap = model(0);
        let mut state = CandleState::new(&varmap).unwrap();
        let mut sgd = SGD::new(varmap.all_vars(), 0.25).unwrap();
        let step = |sgd: &mut SGD| {
            let w = varmap.data().lock().unwrap()["w"].clone();
            let loss = w.as_tensor().sqr().unwrap().sum_all().unwrap();
            sgd.backward_step(&loss).unwrap();
        };
        step(&mut sgd);
        state.save().unwrap();
        let committed = values(&varmap);
        // A step whose round then fails: its update is undone by the restore.
        step(&mut sgd);
        assert_ne!(values(&varmap), committed);
        state.restore().unwrap();
        assert_eq!(values(&varmap), committed);
        step(&mut sgd);
        state.sync(&hvd, 0).unwrap();
        values(&varmap).0
    });
    // w = 1, and each step is w -= 0.25 * 2w: 1 -> 0.5 (committed) -> 0.25 (undone)
    // -> 0.25 again; without the restore the last step would give 0.125.
    for w in results {
        assert_eq!(w, [0.25; 3]);
    }
}
