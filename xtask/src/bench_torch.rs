//! `cargo xtask bench-torch`: `hvd.torch` next to torch's `DistributedDataParallel` over
//! Gloo on the same training job, in one run.
//!
//! Both sides train the peers directory's MNIST-sized task (`ddp_mlp.py`: the same data,
//! model, seeds, SGD and global batch 64), on local ranks with one thread each; only the
//! gradient exchange differs. hvd's side is `examples/pytorch/bench_mlp.py` under hvdrun,
//! with the wheel built from this tree and installed into `$HVD_VENV`. The task's labels
//! are random, so equal losses show that both sides took the same steps, not that either
//! learnt. The comparison itself is `bench_training`'s.

use std::process::Command;

use crate::bench_training::{Side, compare, environment, options};
use crate::workspace_root;

pub fn run(args: &[String]) -> Result<(), String> {
    let o = options(
        "bench-torch",
        args,
        Some(workspace_root().join("../shared/peers")),
    )?;
    let ddp = o.peers.clone().unwrap_or_default().join("ddp_mlp.py");
    if !ddp.exists() {
        return Err(format!(
            "bench-torch: no DDP peer at {} (pass --peers DIR)",
            ddp.display()
        ));
    }
    let (python, path) = environment("bench-torch", &o, "torch", "torch")?;
    let hvdrun = python.with_file_name("hvdrun");
    let script = workspace_root().join("examples/pytorch/bench_mlp.py");
    let (np, epochs) = (o.np.to_string(), o.epochs.to_string());
    let ours = |model: &str| {
        let mut c = Command::new(&hvdrun);
        c.args(["-np", &np])
            .arg(&python)
            .arg(&script)
            .args(["--epochs", &epochs, "--model", model])
            .env("PATH", &path);
        c
    };
    let theirs = |model: &str| {
        let mut c = Command::new(&python);
        c.arg(&ddp)
            .args(["--world", &np, "--epochs", &epochs, "--model", model])
            .env("PATH", &path);
        c
    };
    compare(
        "bench-torch",
        &o,
        "DDP",
        Side {
            what: "hvd.torch's bench_mlp.py",
            command: &ours,
        },
        Side {
            what: "the DDP peer",
            command: &theirs,
        },
    )
}
