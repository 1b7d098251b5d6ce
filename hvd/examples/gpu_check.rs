//! The GPU checks of `cargo xtask gpu-check`, one rank of a job started by hvdrun on a
//! machine with a GPU, NCCL and the CUDA driver. Each prints `PASSED ...` or fails with
//! the error; the bundle's `run` script reads the outcome.
//!
//! ```text
//! hvdrun -np 2 gpu_check conformance          # the public suite on device memory, NCCL
//! hvdrun -np 3 gpu_check killed               # rank 1 dies; the survivors name it
//! HVD_TIMELINE=t.json hvdrun -np 2 gpu_check ops   # device collectives through the runtime
//! ```
//!
//! Several ranks may share one GPU: hvd-nccl gives each a host id of its own when the
//! host's ranks outnumber its GPUs (NCCL before 2.30 refuses sharing otherwise), which is
//! what the bundle's runs on a one-GPU machine prove.

use std::process::ExitCode;
use std::sync::Arc;

use hvd::core::{DeviceMemory, Topology};
use hvd::device::DeviceVec;
use hvd::nccl::{NcclCollective, NcclConfig};
use hvd::{ReduceOp, World};
use hvd_core::conformance::{Options, run_rank_on};

fn main() -> ExitCode {
    let check = std::env::args().nth(1).unwrap_or_default();
    let outcome = match check.as_str() {
        "conformance" => conformance(),
        "killed" => killed(),
        "ops" => ops(),
        other => Err(format!(
            "unknown check {other:?}: conformance, killed or ops"
        )),
    };
    match outcome {
        Ok(passed) => {
            println!("PASSED {passed}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("ERROR: {e}");
            ExitCode::FAILURE
        }
    }
}

fn memory(rank: usize, local_rank: usize) -> Result<Arc<dyn DeviceMemory>, String> {
    hvd::device::memory(rank, local_rank).map_err(|e| e.to_string())
}

/// The conformance suite on device memory through the NCCL transport alone.
fn conformance() -> Result<String, String> {
    let world = World::from_env().map_err(|e| e.to_string())?;
    let topology = Topology::single_host(world.rank, world.size);
    let config = NcclConfig::from_env().map_err(|e| e.to_string())?;
    let nccl = NcclCollective::connect(world.store.clone(), topology, config)
        .map_err(|e| e.to_string())?;
    let memory = memory(world.rank, world.rank)?;
    let report = run_rank_on(&nccl, memory, &Options::default()).map_err(|f| f.to_string())?;
    Ok(format!(
        "{} conformance checks on device memory",
        report.passed.len()
    ))
}

/// Device allreduces until one fails; rank 1 kills itself after two.
fn killed() -> Result<String, String> {
    let hvd = hvd::init().map_err(|e| e.to_string())?;
    let memory = memory(hvd.rank(), hvd.local_rank())?;
    for round in 0.. {
        if hvd.rank() == 1 && round == 2 {
            // SAFETY: raise(3) has no memory-safety preconditions.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        let grad =
            DeviceVec::from_slice(&memory, &vec![1.0f32; 1 << 20]).map_err(|e| e.to_string())?;
        hvd.allreduce("grad", grad, ReduceOp::Sum)
            .map_err(|e| e.to_string())?;
    }
    Err("the allreduces never failed".into())
}

/// Device collectives through the runtime (NCCL, Tensor Fusion), checked.
fn ops() -> Result<String, String> {
    let hvd = hvd::init().map_err(|e| e.to_string())?;
    let memory = memory(hvd.rank(), hvd.local_rank())?;
    let (rank, size) = (hvd.rank(), hvd.size());
    let tensor = |values: &[f32]| DeviceVec::from_slice(&memory, values).map_err(|e| e.to_string());
    // A burst of small tensors, fused into few NCCL calls.
    let handles = (0..64)
        .map(|i| {
            hvd.allreduce_async(
                &format!("grad.{i}"),
                tensor(&[rank as f32 + i as f32; 1000])?,
                ReduceOp::Sum,
            )
            .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    for (i, handle) in handles.into_iter().enumerate() {
        let sum = handle
            .wait()
            .map_err(|e| e.to_string())?
            .to_vec()
            .map_err(|e| e.to_string())?;
        let want = (0..size).map(|r| (r + i) as f32).sum::<f32>();
        if sum.iter().any(|v| *v != want) {
            return Err(format!("grad.{i}: got {}, expected {want}", sum[0]));
        }
    }
    let gathered = hvd
        .allgather("rows", tensor(&vec![rank as f32; rank + 1])?)
        .map_err(|e| e.to_string())?
        .to_vec()
        .map_err(|e| e.to_string())?;
    let want: Vec<f32> = (0..size).flat_map(|r| vec![r as f32; r + 1]).collect();
    if gathered != want {
        return Err(format!("allgather: got {gathered:?}, expected {want:?}"));
    }
    hvd.barrier().map_err(|e| e.to_string())?;
    Ok(format!(
        "device collectives on {}, host ones over {}",
        memory.device(),
        hvd.transport()
    ))
}
