//! Device tensors through the runtime over NCCL, against the GPU test double: ranks as
//! threads, each with the reference transport for host tensors and negotiation and an
//! NCCL transport on a CUDA device of its own.
#![cfg(feature = "nccl")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use hvd::core::reference::LocalGroup;
use hvd::core::{DeviceMemory, MemoryStore, Store};
use hvd::device::DeviceVec;
use hvd::{Buffer, DType, Hvd, ReduceOp, Topology};
use hvd_nccl::{CudaMemory, NcclCollective, NcclConfig};

fn floats(memory: &Arc<dyn DeviceMemory>, values: &[f32]) -> DeviceVec<f32> {
    DeviceVec::from_slice(memory, values).unwrap()
}

fn nccl_config(rank: usize) -> NcclConfig {
    let double = hvd_gpu_double::library_path().unwrap();
    let double = double.to_string_lossy();
    let mut config = NcclConfig::default().with_libraries(double.clone(), double);
    config.device = Some(rank as u32);
    config.op_timeout = Duration::from_secs(60);
    config
}

/// Runs `body` on every rank of an `n`-rank job with its device memory.
fn job<T: Send>(n: usize, body: impl Fn(Hvd, Arc<dyn DeviceMemory>) -> T + Sync) -> Vec<T> {
    job_with(n, common::config(), body)
}

/// [`job`] with the runtime's `config`.
fn job_with<T: Send>(
    n: usize,
    config: hvd::runtime::Config,
    body: impl Fn(Hvd, Arc<dyn DeviceMemory>) -> T + Sync,
) -> Vec<T> {
    let hosts = LocalGroup::new(n).timeout(Duration::from_secs(30)).build();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    std::thread::scope(|s| {
        let handles: Vec<_> = hosts
            .into_iter()
            .enumerate()
            .map(|(rank, host)| {
                let (store, body, runtime) = (store.clone(), &body, config.clone());
                s.spawn(move || {
                    let config = nccl_config(rank);
                    let topology = Topology::single_host(rank, n);
                    let nccl = NcclCollective::connect(store, topology, config.clone()).unwrap();
                    let memory: Arc<dyn DeviceMemory> =
                        CudaMemory::new(&config, rank as u32, rank).unwrap();
                    let hvd = hvd::Builder::new()
                        .collective(host)
                        .device_collective(nccl)
                        .config(runtime)
                        .build()
                        .unwrap();
                    body(hvd, memory)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn device_tensors_are_reduced_gathered_and_broadcast_over_nccl() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = dir.path().join("timeline.json");
    let results = job(2, |hvd, memory| {
        hvd.start_timeline(&timeline).unwrap();
        let r = hvd.rank() as f32;
        let averaged =
            hvd.allreduce_async("grad.w", floats(&memory, &[r + 1.0; 5]), ReduceOp::Average);
        let host = hvd.allreduce_async("grad.cpu", vec![r + 1.0; 3], ReduceOp::Sum);
        let gathered = hvd
            .allgather("gathered", floats(&memory, &vec![r; 1 + hvd.rank()]))
            .unwrap();
        let weights = hvd
            .broadcast("weights", floats(&memory, &[r * 10.0; 2]), 1)
            .unwrap();
        let results = (
            averaged.unwrap().wait().unwrap().to_vec().unwrap(),
            host.unwrap().wait().unwrap(),
            gathered.to_vec().unwrap(),
            weights.to_vec().unwrap(),
        );
        hvd.barrier().unwrap();
        hvd.stop_timeline();
        results
    });
    for (averaged, host, gathered, weights) in results {
        assert_eq!(averaged, [1.5; 5]);
        assert_eq!(host, [3.0; 3]);
        assert_eq!(gathered, [0.0, 1.0, 1.0], "uneven first dimensions");
        assert_eq!(weights, [10.0; 2]);
    }
    // The Timeline names each call after the transport that carried it.
    let trace = std::fs::read_to_string(&timeline).unwrap();
    for span in [
        "NCCL_ALLREDUCE",
        "NCCL_ALLGATHER",
        "NCCL_BROADCAST",
        "LOCAL_ALLREDUCE",
    ] {
        assert!(
            trace.contains(&format!("\"{span}\"")),
            "no {span} in {trace}"
        );
    }
}

/// Runs this test again in a child process with the double's call trace on, and returns
/// the trace.
fn traced_child(test: &str) -> Option<hvd_gpu_double::Trace> {
    if std::env::var_os(hvd_gpu_double::TRACE_VAR).is_some() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(hvd_gpu_double::TRACE_VAR, &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(hvd_gpu_double::Trace::read(&path))
}

/// The ranks' NCCL calls and batched copies, counted from the trace.
fn per_rank(trace: &hvd_gpu_double::Trace, function: &str, rank: usize) -> Vec<usize> {
    trace
        .calls(function)
        .filter(|c| c.arg("rank") == Some(&rank.to_string()))
        .map(|c| c.arg("count").and_then(|n| n.parse().ok()).unwrap_or(0))
        .collect()
}

#[test]
fn a_batch_of_small_device_tensors_is_one_copy_in_one_allreduce_and_one_copy_out() {
    const TEST: &str =
        "a_batch_of_small_device_tensors_is_one_copy_in_one_allreduce_and_one_copy_out";
    const TENSORS: usize = 200;
    const LEN: usize = 1024;
    if let Some(trace) = traced_child(TEST) {
        for rank in 0..2 {
            assert_eq!(
                per_rank(&trace, "ncclAllReduce", rank),
                [TENSORS * LEN],
                "rank {rank}: the whole batch in one allreduce"
            );
        }
        let copies: Vec<&str> = trace
            .calls("cuMemcpyBatchAsync_v2")
            .filter_map(|c| c.arg("count"))
            .collect();
        assert_eq!(
            copies, ["200"; 4],
            "one batched copy in and one out per rank"
        );
        assert_eq!(trace.count("cuMemcpyDtoDAsync_v2"), 0);
        return;
    }
    // The runtime's own middleware stack over a host transport and NCCL, one batch.
    let hosts = LocalGroup::new(2).timeout(Duration::from_secs(30)).build();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    std::thread::scope(|s| {
        for (rank, host) in hosts.into_iter().enumerate() {
            let store = store.clone();
            s.spawn(move || {
                let config = nccl_config(rank);
                let nccl =
                    NcclCollective::connect(store, Topology::single_host(rank, 2), config.clone())
                        .unwrap();
                let memory: Arc<dyn DeviceMemory> =
                    CudaMemory::new(&config, rank as u32, rank).unwrap();
                let router = hvd::runtime::Router::new(Arc::new(host)).with(Arc::new(nccl));
                let recorder = Arc::new(hvd::runtime::Recorder::new());
                let stack = hvd::runtime::Stack::routed(router, 64 << 20, &recorder);
                let tensors: Vec<DeviceVec<f32>> = (0..TENSORS)
                    .map(|i| floats(&memory, &[(rank + i) as f32; LEN]))
                    .collect();
                let names: Vec<String> = (0..TENSORS).map(|i| format!("grad.{i}")).collect();
                let mut views: Vec<hvd::TensorMut<'_>> = tensors
                    .iter()
                    .zip(&names)
                    .map(|(t, name)| {
                        hvd::TensorMut::from_device(
                            name,
                            DType::F32,
                            vec![LEN],
                            t.device_memory().unwrap(),
                        )
                        .unwrap()
                    })
                    .collect();
                stack
                    .collective()
                    .allreduce(&mut views, hvd::Reduction::new(ReduceOp::Sum))
                    .unwrap();
                drop(views);
                for (i, t) in tensors.iter().enumerate() {
                    assert_eq!(
                        t.to_vec().unwrap(),
                        vec![(2 * i + 1) as f32; LEN],
                        "tensor {i}"
                    );
                }
            });
        }
    });
}

/// Marks the start of a step in the double's trace (a line of the test's own, appended
/// as the double appends its calls).
fn mark_step() {
    use std::io::Write;
    let path = std::env::var_os(hvd_gpu_double::TRACE_VAR).unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(file, "{} step", std::process::id()).unwrap();
}

/// One step's device calls, counted from the trace.
#[derive(Debug, Default, Clone, Copy)]
struct StepCalls {
    allocations: usize,
    /// Host waits for the device: hvd's (an event recorded and polled, not waited on by
    /// a stream) and the driver's blocking ones.
    synchronisations: usize,
    copies: usize,
    reductions: usize,
}

/// The calls of each step the test marked.
fn steps(trace: &hvd_gpu_double::Trace) -> Vec<StepCalls> {
    let mut steps: Vec<StepCalls> = Vec::new();
    let lines = &trace.lines;
    for (i, line) in lines.iter().enumerate() {
        if line.function == "step" {
            steps.push(StepCalls::default());
            continue;
        }
        let Some(step) = steps.last_mut() else {
            continue;
        };
        match line.function.as_str() {
            "cuMemAlloc_v2" => step.allocations += 1,
            "cuStreamSynchronize" | "cuEventSynchronize" | "cuCtxSynchronize" => {
                step.synchronisations += 1
            }
            "cuEventRecord"
                if lines.get(i + 1).map(|l| l.function.as_str()) != Some("cuStreamWaitEvent") =>
            {
                step.synchronisations += 1
            }
            "cuMemcpyBatchAsync_v2" | "cuMemcpyDtoDAsync_v2" => step.copies += 1,
            "ncclAllReduce" => step.reductions += 1,
            _ => {}
        }
    }
    steps
}

#[test]
fn fused_steps_of_device_tensors_allocate_nothing_and_wait_per_batch_not_per_tensor() {
    const TEST: &str =
        "fused_steps_of_device_tensors_allocate_nothing_and_wait_per_batch_not_per_tensor";
    const TENSORS: usize = 200;
    const LEN: usize = 16;
    const STEPS: usize = 5;
    if let Some(trace) = traced_child(TEST) {
        let steps = steps(&trace);
        // The last mark starts the check of the results, not a step.
        assert_eq!(steps.len(), STEPS + 1, "{steps:?}");
        for (i, step) in steps.iter().enumerate().take(STEPS).skip(1) {
            assert!(
                // The fusion buffer grows once more if the first step's burst split.
                step.allocations <= 1
                    && step.reductions == 1
                    && step.copies == 2
                    && step.synchronisations <= 2,
                "step {i}: the burst of {TENSORS} tensors as one fused round (one allreduce, \
                 a batched copy in and one out, at most two waits, no allocation per tensor): {step:?}"
            );
        }
        return;
    }
    // The benchmark's step: a burst of asynchronous allreduces, released one by one as a
    // backward pass releases gradients, then every handle waited for. A long cycle time
    // (the background thread lets a burst settle for a tenth of it, until a caller waits)
    // keeps a loaded machine's pauses between two releases from splitting the burst: what
    // is counted is the device work per batch, not the scheduler.
    let config = hvd::runtime::Config {
        cycle_time: Duration::from_secs(10),
        ..common::config()
    };
    job_with(1, config, |hvd, memory| {
        let names: Vec<String> = (0..TENSORS).map(|i| format!("grad.{i}")).collect();
        let mut held: Vec<DeviceVec<f32>> = (0..TENSORS)
            .map(|i| floats(&memory, &[i as f32; LEN]))
            .collect();
        for _ in 0..STEPS {
            mark_step();
            let handles: Vec<_> = names
                .iter()
                .zip(std::mem::take(&mut held))
                .map(|(name, t)| {
                    let released = std::time::Instant::now();
                    while released.elapsed() < Duration::from_micros(3) {}
                    hvd.allreduce_async(name, t, ReduceOp::Sum).unwrap()
                })
                .collect();
            held = handles.into_iter().map(|h| h.wait().unwrap()).collect();
        }
        mark_step();
        for (i, t) in held.iter().enumerate() {
            assert_eq!(t.to_vec().unwrap(), [i as f32; LEN], "tensor {i}");
        }
    });
}
