//! Device tensors through the runtime, without a GPU: a buffer that presents host memory
//! as `cuda:0` memory, and a device transport that reduces it over the reference
//! transport. Routing, negotiation of devices, and the errors a job without a device
//! transport gives.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::config;
use hvd::core::layer::Layer;
use hvd::core::reference::{LocalCollective, LocalGroup};
use hvd::core::{DeviceBuffer, MemoryMut, Operation};
use hvd::{
    Buffer, Collective, Compression, DType, Device, Hvd, ReduceOp, Reduction, Result, Tensor,
    TensorMut,
};

/// f32 elements standing in for memory of `cuda:0`: the runtime sees them through the
/// device view only.
struct FakeCuda(Vec<f32>);

impl Buffer for FakeCuda {
    fn dtype(&self) -> DType {
        DType::F32
    }
    fn shape(&self) -> Vec<usize> {
        vec![self.0.len()]
    }
    fn bytes(&self) -> &[u8] {
        &[]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut []
    }
    fn zeroed(&self, shape: &[usize]) -> Self {
        FakeCuda(vec![0.0; shape.iter().product()])
    }
    fn device(&self) -> Device {
        Device::Cuda(0)
    }
    fn device_memory(&self) -> Option<DeviceBuffer<'_>> {
        // SAFETY: the address is this buffer's own host memory, which only the
        // `FakeNccl` transport below turns back into a slice, while the runtime holds
        // the buffer.
        Some(unsafe { DeviceBuffer::cuda(0, self.0.as_ptr() as u64, self.0.len() * 4) })
    }
}

/// A "device transport" for `cuda:0`: it turns the fake device memory back into host
/// slices and runs the reference transport on them, recording the tensors it got.
struct FakeNccl {
    inner: LocalCollective,
    seen: Arc<Mutex<Vec<String>>>,
}

fn host_view<'a>(name: &'a str, dtype: DType, memory: DeviceBuffer<'a>) -> TensorMut<'a> {
    // SAFETY: every DeviceBuffer in these tests comes from `FakeCuda::device_memory`,
    // host memory the runtime holds mutably for the call.
    let bytes = unsafe { std::slice::from_raw_parts_mut(memory.ptr() as *mut u8, memory.len()) };
    TensorMut::from_bytes(name, dtype, vec![memory.len() / dtype.size()], bytes).unwrap()
}

fn as_host<'a>(t: &'a mut TensorMut<'_>) -> TensorMut<'a> {
    let (name, dtype) = (t.name(), t.dtype());
    match t.memory() {
        MemoryMut::Device(memory) => host_view(name, dtype, *memory),
        // What a transport reading one buffer and writing another does, done on the
        // host: the reduction then runs in the output.
        MemoryMut::DeviceInto { input, output } => {
            // SAFETY: as in `host_view`; the input is another buffer, read only.
            let from = unsafe { std::slice::from_raw_parts(input.ptr() as *const u8, input.len()) };
            let mut view = host_view(name, dtype, *output);
            view.host_mut().unwrap().copy_from_slice(from);
            view
        }
        MemoryMut::Host(_) => panic!("the router sent host memory to the device transport"),
    }
}

/// The name a transport records for a tensor: an out-of-place one is marked.
fn seen_as(t: &TensorMut<'_>) -> String {
    match t.device_buffers() {
        Some((input, output)) if input.ptr() != output.ptr() => {
            format!("{} (out of place)", t.name())
        }
        _ => t.name().to_owned(),
    }
}

impl FakeNccl {
    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let hvd::core::Memory::Device(memory) = input.memory() else {
            panic!("the router sent host memory to the device transport");
        };
        // SAFETY: as in `host_view`; read only.
        let bytes = unsafe { std::slice::from_raw_parts(memory.ptr() as *const u8, memory.len()) };
        let len = memory.len() / input.dtype().size();
        let input = Tensor::from_bytes(input.name(), input.dtype(), vec![len], bytes)?;
        self.inner.allgather(&input, &mut as_host(output), counts)
    }
}

impl Layer for FakeNccl {
    type Inner = LocalCollective;
    fn inner(&self) -> &LocalCollective {
        &self.inner
    }
    /// Allreduce, broadcast and allgather on the fake device memory; nothing else is
    /// used by these tests.
    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        match op {
            Operation::Allreduce { tensors, reduction } => {
                let names = tensors.iter().map(seen_as);
                self.seen.lock().unwrap().extend(names);
                let mut host: Vec<TensorMut> = tensors.iter_mut().map(as_host).collect();
                self.inner.allreduce(&mut host, reduction)
            }
            Operation::Broadcast { tensors, root } => {
                let mut host: Vec<TensorMut> = tensors.iter_mut().map(as_host).collect();
                self.inner.broadcast(&mut host, root)
            }
            Operation::Allgather {
                input,
                output,
                counts,
            } => {
                self.seen.lock().unwrap().push(input.name().to_owned());
                self.allgather(input, output, counts)
            }
            Operation::Barrier => self.inner.barrier(),
            other => unimplemented!("{} is not used by these tests", other.kind()),
        }
    }
    fn split(_: &Self, _: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        Ok(None)
    }
    fn backend(_: &Self) -> &'static str {
        "fake-nccl"
    }
    fn supports(_: &Self, device: Device) -> bool {
        device == Device::Cuda(0)
    }
}

/// Runs `body` on every rank of a 2-rank job, with the fake device transport when
/// `with_device` is set; returns each rank's result and the tensors the device
/// transports saw.
fn job<T: Send>(with_device: bool, body: impl Fn(Hvd) -> T + Sync) -> (Vec<T>, Vec<String>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let host = LocalGroup::new(2).timeout(Duration::from_secs(30)).build();
    let device = LocalGroup::new(2).timeout(Duration::from_secs(30)).build();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = host
            .into_iter()
            .zip(device)
            .map(|(host, device)| {
                let (seen, body) = (seen.clone(), &body);
                s.spawn(move || {
                    let mut builder = hvd::Builder::new().collective(host).config(config());
                    if with_device {
                        builder = builder.device_collective(FakeNccl {
                            inner: device,
                            seen,
                        });
                    }
                    body(builder.build().unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let seen = seen.lock().unwrap().clone();
    (results, seen)
}

#[test]
fn device_tensors_go_to_the_device_transport_and_host_ones_to_the_host_transport() {
    let (results, seen) = job(true, |hvd| {
        let r = hvd.rank() as f32;
        let device = hvd.allreduce_async("grad.gpu", FakeCuda(vec![r + 1.0; 5]), ReduceOp::Sum);
        let host = hvd.allreduce_async("grad.cpu", vec![r + 1.0; 5], ReduceOp::Sum);
        let gathered = hvd.allgather("gathered.gpu", FakeCuda(vec![r; 2])).unwrap();
        (
            device.unwrap().wait().unwrap().0,
            host.unwrap().wait().unwrap(),
            gathered.0,
        )
    });
    for (device, host, gathered) in results {
        assert_eq!(device, [3.0; 5]);
        assert_eq!(host, [3.0; 5]);
        assert_eq!(gathered, [0.0, 0.0, 1.0, 1.0]);
    }
    let mut seen = seen;
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        ["gathered.gpu", "grad.gpu"],
        "no host tensor on the device"
    );
}

/// Without the `nccl` feature there is no host staging: the router refuses the tensor.
#[test]
#[cfg(not(feature = "nccl"))]
fn a_device_tensor_in_a_job_without_a_device_transport_fails_naming_it() {
    let (errors, _) = job(false, |hvd| {
        hvd.allreduce("grad.gpu", FakeCuda(vec![1.0; 4]), ReduceOp::Sum)
            .map(|t| t.0)
            .unwrap_err()
            .to_string()
    });
    for (rank, err) in errors.iter().enumerate() {
        assert_eq!(
            *err,
            format!(
                "local transport does not support cuda:0 memory (rank {rank}, allreduce of \
                 'grad.gpu'): no transport of this job (local) takes it; a job with device \
                 tensors needs a device transport such as NCCL (HVD_BACKEND=nccl), or host \
                 staging (hvd built with the nccl feature)"
            )
        );
    }
}

/// With the `nccl` feature, such a tensor is staged through host memory, which needs the
/// CUDA driver: without one, the error says which library is missing and how to get it.
#[test]
#[cfg(feature = "nccl")]
fn a_device_tensor_staged_without_a_cuda_driver_fails_naming_the_driver() {
    let (errors, _) = job(false, |hvd| {
        hvd.allreduce("grad.gpu", FakeCuda(vec![1.0; 4]), ReduceOp::Sum)
            .map(|t| t.0)
            .unwrap_err()
            .to_string()
    });
    for err in errors {
        assert!(
            err.starts_with(
                "the CUDA driver (libcuda.so.1) is not available: install the NVIDIA driver \
                 (libcuda.so.1 comes with it), or set HVD_CUDA_LIBRARY to its path"
            ),
            "{err}"
        );
    }
}

#[test]
fn ranks_that_disagree_on_a_tensors_device_fail_with_a_mismatch_on_every_rank() {
    let (errors, _) = job(true, |hvd| {
        let result = if hvd.rank() == 0 {
            hvd.allreduce("w", vec![1.0f32; 4], ReduceOp::Sum).map(drop)
        } else {
            hvd.allreduce("w", FakeCuda(vec![1.0; 4]), ReduceOp::Sum)
                .map(drop)
        };
        result.unwrap_err().to_string()
    });
    for err in errors {
        assert_eq!(
            err,
            "Mismatched devices for tensor 'w': rank 0 has cpu, rank 1 has cuda:0"
        );
    }
}

#[test]
fn compressing_a_device_tensor_is_refused_where_it_is_submitted() {
    let (errors, _) = job(true, |hvd| {
        let reduction = Reduction::new(ReduceOp::Sum);
        hvd.allreduce_compressed_async("g", FakeCuda(vec![1.0; 4]), reduction, Compression::Fp16)
            .map(drop)
            .unwrap_err()
            .to_string()
    });
    for (rank, err) in errors.iter().enumerate() {
        assert_eq!(
            *err,
            format!(
                "rank {rank}: invalid allreduce of tensor 'g': fp16 compression narrows host \
                 tensors only; this one is on cuda:0"
            )
        );
    }
}

#[test]
fn an_out_of_place_device_allreduce_reaches_the_transport_with_both_buffers() {
    let (results, seen) = job(true, |hvd| {
        let r = hvd.rank() as f32;
        let (input, output) = (FakeCuda(vec![r + 1.0; 5]), FakeCuda(vec![-7.0; 5]));
        let reduction = Reduction::new(ReduceOp::Sum);
        let result = hvd
            .allreduce_into_async("grad.gpu", input, output, reduction)
            .unwrap()
            .wait()
            .unwrap();
        result.0
    });
    for result in results {
        assert_eq!(result, [3.0; 5]);
    }
    assert_eq!(
        seen,
        ["grad.gpu (out of place)", "grad.gpu (out of place)"],
        "the transport reads the input and writes the output: the runtime copied nothing"
    );
}

#[test]
fn an_out_of_place_host_allreduce_writes_the_result_into_its_output() {
    // A host input is the caller's to give: it is consumed, and only the output, which
    // started as zeros, can show that the input's values were reduced.
    let (results, _) = job(true, |hvd| {
        let r = hvd.rank() as f32;
        let reduction = Reduction::new(ReduceOp::Average);
        hvd.allreduce_into_async("grad.cpu", vec![r + 1.0; 3], vec![0.0f32; 3], reduction)
            .unwrap()
            .wait()
            .unwrap()
    });
    for output in results {
        assert_eq!(output, [1.5; 3]);
    }
}

#[test]
fn an_out_of_place_allreduce_whose_output_does_not_fit_is_refused_where_it_is_submitted() {
    let (errors, _) = job(true, |hvd| {
        let reduction = Reduction::new(ReduceOp::Sum);
        let device = hvd
            .allreduce_into_async(
                "g",
                FakeCuda(vec![1.0; 4]),
                FakeCuda(vec![0.0; 3]),
                reduction,
            )
            .map(drop)
            .unwrap_err()
            .to_string();
        let host = hvd
            .allreduce_into_async("h", vec![1.0f32; 4], vec![0.0f32; 3], reduction)
            .map(drop)
            .unwrap_err()
            .to_string();
        (device, host)
    });
    for (rank, (device, host)) in errors.iter().enumerate() {
        assert_eq!(
            *device,
            format!(
                "rank {rank}: invalid allreduce of tensor 'g': the output (f32 [3] on cuda:0, \
                 12 bytes) does not match the input (f32 [4] on cuda:0, 16 bytes)"
            )
        );
        assert_eq!(
            *host,
            format!(
                "rank {rank}: invalid allreduce of tensor 'h': the output (f32 [3] on cpu, 12 \
                 bytes) does not match the input (f32 [4] on cpu, 16 bytes)"
            )
        );
    }
}

/// Adasum combines on the host, so a device tensor needs memory that copies it there: a
/// device transport that offers none fails the call naming it.
#[test]
fn adasum_of_a_device_tensor_needs_a_transport_that_copies_it_to_the_host() {
    let (errors, _) = job(true, |hvd| {
        hvd.adasum_async("g", FakeCuda(vec![1.0; 4]))
            .and_then(|h| h.wait())
            .map(drop)
            .unwrap_err()
            .to_string()
    });
    for (rank, err) in errors.iter().enumerate() {
        assert_eq!(
            *err,
            format!(
                "fake-nccl transport does not support copying cuda:0 memory to the host \
                 (rank {rank}, adasum of 'g')"
            )
        );
    }
}

/// Without a device transport or host staging, Adasum refuses a device tensor where it
/// is submitted.
#[test]
#[cfg(not(feature = "nccl"))]
fn adasum_of_a_device_tensor_in_a_job_that_cannot_copy_it_is_refused_where_it_is_submitted() {
    let (errors, _) = job(false, |hvd| {
        hvd.adasum_async("g", FakeCuda(vec![1.0; 4]))
            .map(drop)
            .unwrap_err()
            .to_string()
    });
    for (rank, err) in errors.iter().enumerate() {
        assert_eq!(
            *err,
            format!(
                "rank {rank}: invalid adasum of tensor 'g': Adasum runs on host memory; this \
                 tensor is on cuda:0"
            )
        );
    }
}

#[test]
fn an_out_of_place_host_adasum_writes_the_result_into_its_output() {
    let (results, _) = job(true, |hvd| {
        let input = vec![hvd.rank() as f32 + 1.0; 4];
        hvd.adasum_into_async("adasum.into", input, vec![0.0f32; 4])
            .unwrap()
            .wait()
            .unwrap()
    });
    for output in results {
        // Parallel vectors a and b = 2a: Adasum keeps 3/4 of b.
        assert_eq!(output, [1.5; 4]);
    }
}
