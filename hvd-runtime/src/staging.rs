//! Host staging: device tensors of a job with no transport for their device travel over
//! the host transport, copied to host memory and back (what Horovod does without NCCL),
//! so a GPU job without NCCL still trains, more slowly.

use std::sync::{Arc, Mutex};

use hvd_core::{
    Collective, DType, Device, DeviceBuffer, DeviceMemory, Error, Memory, Operation, Result,
    Tensor, TensorMut,
};

/// Gives the memory (with a stream of its own) of a device, for staging its tensors: what
/// a transport's provider offers (`Provider::staging`).
pub type DeviceMemoryFor = hvd_core::provider::MemoryFor;

/// The memory made for each device so far.
type Made = Vec<(Device, Arc<dyn DeviceMemory>)>;

/// The staging memories of a router, made on first use per device.
#[derive(Clone)]
pub(crate) struct Staging {
    memory_for: DeviceMemoryFor,
    made: Arc<Mutex<Made>>,
}

impl Staging {
    pub(crate) fn new(memory_for: DeviceMemoryFor) -> Staging {
        Staging {
            memory_for,
            made: Arc::default(),
        }
    }

    /// The memory of `device`.
    pub(crate) fn memory(&self, device: Device) -> Result<Arc<dyn DeviceMemory>> {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, memory)) = made.iter().find(|(d, _)| *d == device) {
            return Ok(memory.clone());
        }
        let memory = (self.memory_for)(device)?;
        made.push((device, memory.clone()));
        Ok(memory)
    }
}

/// A device tensor's bytes, copied to the host.
struct Staged {
    bytes: Vec<u8>,
}

fn not_device(tensor: &str) -> Error {
    Error::Unsupported {
        backend: "hvd",
        what: format!("staging host tensor '{tensor}' through host memory"),
    }
}

/// The device memory a writable tensor is read from (an out-of-place tensor's input) and
/// the one its result goes to.
fn of_mut<'a>(t: &TensorMut<'a>) -> Result<(DeviceBuffer<'a>, DeviceBuffer<'a>)> {
    t.device_buffers().ok_or_else(|| not_device(t.name()))
}

/// The device memory of a read-only tensor.
fn of<'a>(t: &Tensor<'a>) -> Result<DeviceBuffer<'a>> {
    match t.memory() {
        Memory::Device(buffer) => Ok(buffer),
        Memory::Host(_) => Err(not_device(t.name())),
    }
}

fn download(memory: &dyn DeviceMemory, buffer: &DeviceBuffer<'_>) -> Result<Staged> {
    let mut bytes = vec![0u8; buffer.len()];
    memory.download(buffer, &mut bytes)?;
    Ok(Staged { bytes })
}

/// Host views over staged copies, named and shaped as the tensors.
fn host_views<'a>(
    names: &'a [(String, DType, Vec<usize>)],
    staged: &'a mut [Staged],
) -> Result<Vec<TensorMut<'a>>> {
    names
        .iter()
        .zip(staged.iter_mut())
        .map(|((name, dtype, shape), s)| {
            TensorMut::from_bytes(name, *dtype, shape.clone(), &mut s.bytes)
        })
        .collect()
}

/// Runs `op`, whose tensors are in `memory`'s device, on `host` through host copies.
pub(crate) fn run(
    memory: &dyn DeviceMemory,
    op: Operation<'_, '_>,
    host: &dyn Collective,
) -> Result<()> {
    match op {
        Operation::Allreduce { tensors, reduction } => batch(memory, tensors, |host_tensors| {
            host.allreduce(host_tensors, reduction)
        }),
        Operation::Broadcast { tensors, root } => batch(memory, tensors, |host_tensors| {
            host.broadcast(host_tensors, root)
        }),
        Operation::Allgather {
            input,
            output,
            counts,
        } => resized(memory, input, output, |i, o| host.allgather(i, o, counts)),
        Operation::Alltoall {
            input,
            send_counts,
            output,
            recv_counts,
        } => resized(memory, input, output, |i, o| {
            host.alltoall(i, send_counts, o, recv_counts)
        }),
        Operation::Reducescatter {
            input,
            output,
            counts,
            reduction,
        } => resized(memory, input, output, |i, o| {
            host.reducescatter(i, o, counts, reduction)
        }),
        Operation::Barrier => host.barrier(),
    }
}

/// Runs `call` on host copies of a batch of device tensors (of their inputs, for
/// out-of-place ones), then copies the results back (to their outputs): one copy down
/// and one up per tensor.
pub(crate) fn batch(
    memory: &dyn DeviceMemory,
    tensors: &mut [TensorMut<'_>],
    call: impl FnOnce(&mut [TensorMut<'_>]) -> Result<()>,
) -> Result<()> {
    let names: Vec<(String, DType, Vec<usize>)> = tensors
        .iter()
        .map(|t| (t.name().to_owned(), t.dtype(), t.shape().to_vec()))
        .collect();
    let buffers = tensors.iter().map(of_mut).collect::<Result<Vec<_>>>()?;
    let mut staged = buffers
        .iter()
        .map(|(input, _)| download(memory, input))
        .collect::<Result<Vec<_>>>()?;
    call(&mut host_views(&names, &mut staged)?)?;
    for ((_, output), s) in buffers.iter().zip(&staged) {
        memory.upload(output, &s.bytes)?;
    }
    memory.synchronize()
}

/// Runs `call` on a host copy of `input` and a host output, then copies the output back.
fn resized(
    memory: &dyn DeviceMemory,
    input: &Tensor<'_>,
    output: &mut TensorMut<'_>,
    call: impl FnOnce(&Tensor<'_>, &mut TensorMut<'_>) -> Result<()>,
) -> Result<()> {
    let source = download(memory, &of(input)?)?;
    let (_, target) = of_mut(output)?;
    let mut result = vec![0u8; target.len()];
    let host_input = Tensor::from_bytes(
        input.name(),
        input.dtype(),
        input.shape().to_vec(),
        &source.bytes,
    )?;
    let mut host_output = TensorMut::from_bytes(
        output.name(),
        output.dtype(),
        output.shape().to_vec(),
        &mut result,
    )?;
    call(&host_input, &mut host_output)?;
    memory.upload(&target, &result)?;
    memory.synchronize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_tensor_is_not_staged() {
        let mut v = vec![1.0f32; 2];
        let t = TensorMut::from_slice("w", &mut v);
        assert_eq!(
            of_mut(&t).unwrap_err().to_string(),
            "hvd transport does not support staging host tensor 'w' through host memory"
        );
    }
}
