//! `cargo xtask bench-tf`: `hvd.keras` next to TensorFlow's `MultiWorkerMirroredStrategy`
//! on the same Keras training job, in one run.
//!
//! Both sides are `examples/tensorflow2/bench_keras.py`: a Keras MLP or CNN on synthetic
//! MNIST-shaped data, each rank its strided shard in order, the same seeds, SGD and global
//! batch 64, `model.fit` without XLA, on local ranks with one thread each; only the
//! gradient exchange differs. hvd's side runs under the environment's hvdrun; the peer
//! starts its workers itself, on localhost ports free at the time, with `TF_CONFIG`. The
//! data is learnable and both sides average the same gradients, so their losses agree
//! and fall. The comparison itself is `bench_training`'s.

use std::process::Command;

use crate::bench_training::{Side, compare, environment, options};
use crate::workspace_root;

pub fn run(args: &[String]) -> Result<(), String> {
    let o = options("bench-tf", args, None)?;
    let (python, path) = environment("bench-tf", &o, "tensorflow, keras", "tensorflow-cpu")?;
    let hvdrun = python.with_file_name("hvdrun");
    let script = workspace_root().join("examples/tensorflow2/bench_keras.py");
    let (np, epochs) = (o.np.to_string(), o.epochs.to_string());
    let bench = |launcher: &mut Command, strategy: &str, model: &str| {
        launcher
            .arg(&script)
            .args([
                "--strategy",
                strategy,
                "--model",
                model,
                "--epochs",
                &epochs,
            ])
            .env("PATH", &path)
            .env("OMP_NUM_THREADS", "1")
            .env("TF_CPP_MIN_LOG_LEVEL", "2");
    };
    let ours = |model: &str| {
        let mut c = Command::new(&hvdrun);
        c.args(["-np", &np]).arg(&python);
        bench(&mut c, "hvd", model);
        c
    };
    let theirs = |model: &str| {
        let mut c = Command::new(&python);
        bench(&mut c, "mwms", model);
        c.args(["--np", &np]);
        c
    };
    compare(
        "bench-tf",
        &o,
        "MWMS",
        Side {
            what: "hvd.keras's bench_keras.py",
            command: &ours,
        },
        Side {
            what: "bench_keras.py with MultiWorkerMirroredStrategy",
            command: &theirs,
        },
    )
}
