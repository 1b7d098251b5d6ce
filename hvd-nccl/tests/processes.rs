//! Ranks as processes (this test binary once per rank, meeting through a `FileStore`,
//! loading the GPU test double): the conformance suite on device memory, on a device per
//! rank and on one device shared, and in lazy mode, where streams run only what is waited
//! for, so a missing synchronisation shows as a wrong result; the call trace.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd_core::conformance::{Options, run_rank_on, run_threads_on};
use hvd_core::layer::Layer;
use hvd_core::{
    Collective, DType, DeviceBlock, MemoryMut, MemoryStore, Operation, Ready, ReduceOp, Reduction,
    Result, Store, TensorMut,
};
use hvd_gpu_double::{LAZY_VAR, TRACE_VAR, Trace};

/// Runs the suite in `size` processes with `env`; every rank must pass.
fn conformance_in_processes(
    test: &str,
    size: usize,
    options: Options,
    env: &[(Option<usize>, &str, &str)],
) {
    if let Some((_, _, connected)) = common::child() {
        let (group, memory) = connected.unwrap();
        match run_rank_on(&group, memory, &options) {
            Ok(report) => println!("PASSED {} checks", report.passed.len()),
            Err(failure) => panic!("FAILED {failure}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ranks = common::launch(test, size, dir.path(), env);
    common::wait(&mut ranks, Instant::now() + Duration::from_secs(240));
    for (rank, r) in ranks.iter().enumerate() {
        let output = r.output();
        assert!(
            r.exit.is_some_and(|s| s.success()) && output.contains("PASSED"),
            "rank {rank} of {size} ({:?}):\n{output}",
            r.exit
        );
    }
}

#[test]
fn conformance_in_two_processes() {
    conformance_in_processes("conformance_in_two_processes", 2, Options::default(), &[]);
}

#[test]
fn conformance_in_three_processes() {
    conformance_in_processes("conformance_in_three_processes", 3, Options::quick(), &[]);
}

#[test]
fn conformance_in_four_processes_sharing_one_gpu() {
    let one_device = [(None, hvd_gpu_double::DEVICES_VAR, "1")];
    conformance_in_processes(
        "conformance_in_four_processes_sharing_one_gpu",
        4,
        Options::quick(),
        &one_device,
    );
}

#[test]
fn conformance_in_lazy_mode_gives_no_wrong_result() {
    let lazy = [(None, LAZY_VAR, "1")];
    conformance_in_processes(
        "conformance_in_lazy_mode_gives_no_wrong_result",
        2,
        Options::quick(),
        &lazy,
    );
}

/// The NCCL transport with its inputs' producers forgotten: it reads them without waiting
/// (what a transport that ignores `Ready` does).
struct Hasty(hvd_nccl::NcclCollective);

fn now<'a>(t: &mut TensorMut<'a>) -> TensorMut<'a> {
    let (name, dtype, shape) = (t.name(), t.dtype(), t.shape().to_vec());
    let MemoryMut::Device(buffer) = t.memory() else {
        unreachable!("device tensors only")
    };
    TensorMut::from_device(name, dtype, shape, buffer.after(Ready::Now)).unwrap()
}

impl Layer for Hasty {
    type Inner = hvd_nccl::NcclCollective;
    fn inner(&self) -> &Self::Inner {
        &self.0
    }
    fn backend(_: &Self) -> &'static str {
        "hasty"
    }
    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        match op {
            Operation::Allreduce { tensors, reduction } => {
                let mut hasty: Vec<TensorMut<'_>> = tensors.iter_mut().map(now).collect();
                self.0.allreduce(&mut hasty, reduction)
            }
            other => other.run(&self.0),
        }
    }
    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        this.0.split(members)
    }
}

#[test]
fn lazy_mode_catches_a_transport_that_does_not_wait_for_its_inputs() {
    const TEST: &str = "lazy_mode_catches_a_transport_that_does_not_wait_for_its_inputs";
    if let Some((rank, _, connected)) = common::child() {
        if rank == 0 {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
            let outcome = run_threads_on(2, &Options::quick(), |r| {
                let (group, memory) = common::rank(store.clone(), r, 2, &common::thread_config(r))?;
                Ok((Hasty(group), memory))
            });
            println!(
                "OUTCOME {}",
                outcome.map_or_else(|f| f.to_string(), |()| "passed".into())
            );
        }
        drop(connected);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // One process of its own, so that lazy mode is on from the double's start.
    let mut ranks = common::launch(TEST, 1, dir.path(), &[(None, LAZY_VAR, "1")]);
    common::wait(&mut ranks, Instant::now() + Duration::from_secs(120));
    let outcome = ranks[0]
        .line("OUTCOME ")
        .unwrap_or_else(|| ranks[0].output());
    assert!(
        outcome.starts_with("conformance check 'allreduce u8 sum' failed on rank"),
        "{outcome}"
    );
    assert!(
        outcome.contains(": expected "),
        "a wrong result, not an error: {outcome}"
    );
}

#[test]
fn a_batch_is_one_group_of_one_allreduce_per_tensor_in_the_trace() {
    const TEST: &str = "a_batch_is_one_group_of_one_allreduce_per_tensor_in_the_trace";
    if let Some((rank, _, connected)) = common::child() {
        let (group, memory) = connected.unwrap();
        let mut blocks: Vec<DeviceBlock> = (0..3)
            .map(|i| DeviceBlock::with_contents(&memory, &[rank as u8 + i; 16]).unwrap())
            .collect();
        let mut views: Vec<TensorMut<'_>> = blocks
            .iter_mut()
            .map(|b| TensorMut::from_device("g", DType::U8, vec![16], b.buffer()).unwrap())
            .collect();
        group
            .allreduce(&mut views, Reduction::new(ReduceOp::Sum))
            .unwrap();
        drop(views);
        let sums: Vec<u8> = blocks
            .iter_mut()
            .map(|b| b.contents().unwrap()[0])
            .collect();
        println!("SUMS {sums:?}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let trace_text = trace.to_string_lossy().into_owned();
    let mut ranks = common::launch(TEST, 2, dir.path(), &[(None, TRACE_VAR, &trace_text)]);
    common::wait(&mut ranks, Instant::now() + Duration::from_secs(120));
    for r in &ranks {
        assert_eq!(
            r.line("SUMS ").as_deref(),
            Some("[1, 3, 5]"),
            "{}",
            r.output()
        );
    }
    let trace = Trace::read(&trace);
    for rank in ["0", "1"] {
        let reduces = trace
            .calls("ncclAllReduce")
            .filter(|c| c.arg("rank") == Some(rank))
            .count();
        assert_eq!(reduces, 3, "rank {rank}: one ncclAllReduce per tensor");
    }
    assert_eq!(trace.count("ncclGroupStart"), 2, "one group per rank");
    assert_eq!(trace.count("ncclGroupEnd"), 2);
}

#[test]
fn an_out_of_place_allreduce_reads_its_input_and_writes_its_output_with_no_device_copy() {
    const TEST: &str =
        "an_out_of_place_allreduce_reads_its_input_and_writes_its_output_with_no_device_copy";
    if let Some((rank, _, connected)) = common::child() {
        let (group, memory) = connected.unwrap();
        let r = rank as u8;
        // u8 reduces on NCCL directly; i16 is staged through the host (widened to i32).
        let mut inputs = [
            DeviceBlock::with_contents(&memory, &[r + 1; 8]).unwrap(),
            DeviceBlock::with_contents(&memory, &[r + 1, 0, r + 1, 0]).unwrap(),
        ];
        let mut outputs = [
            DeviceBlock::with_contents(&memory, &[9; 8]).unwrap(),
            DeviceBlock::with_contents(&memory, &[9; 4]).unwrap(),
        ];
        let mut views = vec![
            TensorMut::from_device_into(
                "u8",
                DType::U8,
                vec![8],
                inputs[0].buffer(),
                outputs[0].buffer(),
            )
            .unwrap(),
            TensorMut::from_device_into(
                "i16",
                DType::I16,
                vec![2],
                inputs[1].buffer(),
                outputs[1].buffer(),
            )
            .unwrap(),
        ];
        group
            .allreduce(&mut views, Reduction::new(ReduceOp::Sum))
            .unwrap();
        drop(views);
        let read = |blocks: &mut [DeviceBlock]| -> Vec<Vec<u8>> {
            blocks.iter_mut().map(|b| b.contents().unwrap()).collect()
        };
        println!("INPUTS {:?}", read(&mut inputs));
        println!("OUTPUTS {:?}", read(&mut outputs));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let trace_text = trace.to_string_lossy().into_owned();
    let mut ranks = common::launch(TEST, 2, dir.path(), &[(None, TRACE_VAR, &trace_text)]);
    common::wait(&mut ranks, Instant::now() + Duration::from_secs(120));
    for (rank, r) in ranks.iter().enumerate() {
        let v = rank + 1;
        assert_eq!(
            r.line("INPUTS "),
            Some(format!(
                "[[{v}, {v}, {v}, {v}, {v}, {v}, {v}, {v}], [{v}, 0, {v}, 0]]"
            )),
            "the input is left as it was: {}",
            r.output()
        );
        assert_eq!(
            r.line("OUTPUTS ").as_deref(),
            Some("[[3, 3, 3, 3, 3, 3, 3, 3], [3, 0, 3, 0]]"),
            "{}",
            r.output()
        );
    }
    let trace = Trace::read(&trace);
    assert_eq!(trace.count("ncclAllReduce"), 4, "one per tensor per rank");
    assert_eq!(
        trace.count("cuMemcpyDtoDAsync_v2") + trace.count("cuMemcpyDtoD_v2"),
        0,
        "no device copy of the input"
    );
}
