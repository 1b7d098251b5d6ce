//! The `Collective` trait over NCCL: each call is one group of NCCL calls on the
//! transport's stream, after the work its buffers are ready after.

use std::ffi::c_int;
use std::sync::Arc;

use hvd_core::{
    Collective, DType, Device, DeviceBlock, DeviceBuffer, DeviceMemory, Error, Memory, MemoryMut,
    Reduction, Result, Tensor, TensorMut, Topology, batch_name, kernels, validate,
};

use crate::collective::NcclCollective;
use crate::launch::{Launch, Queued, op_code};
use crate::mapping::{self, DataType};
use crate::route::{self, Route};

/// Byte offsets of consecutive blocks of `counts` elements of `width` bytes.
fn offsets(counts: &[usize], width: usize) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |at, c| {
            let start = *at;
            *at += c * width;
            Some(start)
        })
        .collect()
}

/// A tensor of a staged reduction: the device copy its reduction runs on, in the wire
/// type.
struct Staged {
    dtype: DType,
    wire: DType,
    copy: DeviceBlock,
}

impl NcclCollective {
    fn dynamic_memory(&self) -> Arc<dyn DeviceMemory> {
        self.memory.clone()
    }

    fn unsupported(&self, op: &str, tensor: &str, device: Device) -> Error {
        let why = match device {
            Device::Cpu => "NCCL takes device memory only".to_owned(),
            _ => format!(
                "this rank's NCCL communicator is on cuda:{}",
                self.device.ordinal
            ),
        };
        Error::Unsupported {
            backend: "nccl",
            what: format!(
                "{device} memory (rank {}, {op} of '{tensor}'): {why}",
                self.rank()
            ),
        }
    }

    fn check_device(&self, op: &str, tensor: &str, buffer: DeviceBuffer<'_>) -> Result<()> {
        if buffer.device() == Device::Cuda(self.device.ordinal) {
            Ok(())
        } else {
            Err(self.unsupported(op, tensor, buffer.device()))
        }
    }

    fn input<'a>(&self, op: &str, t: &Tensor<'a>) -> Result<DeviceBuffer<'a>> {
        match t.memory() {
            Memory::Device(buffer) => self.check_device(op, t.name(), buffer).map(|()| buffer),
            Memory::Host(_) => Err(self.unsupported(op, t.name(), Device::Cpu)),
        }
    }

    fn output<'a>(&self, op: &str, t: &mut TensorMut<'a>) -> Result<DeviceBuffer<'a>> {
        let name = t.name();
        match t.memory() {
            MemoryMut::Device(buffer) => self.check_device(op, name, *buffer).map(|()| *buffer),
            MemoryMut::Host(_) => Err(self.unsupported(op, name, Device::Cpu)),
            MemoryMut::DeviceInto { .. } => Err(Error::Unsupported {
                backend: "nccl",
                what: format!("{op} of '{name}' from a separate input (allreduce only)"),
            }),
        }
    }

    /// The memory an allreduce reads and the memory it writes: the same for an in-place
    /// tensor, the send and receive buffers of an out-of-place one.
    fn reduced<'a>(&self, t: &TensorMut<'a>) -> Result<(DeviceBuffer<'a>, DeviceBuffer<'a>)> {
        let (input, output) = t
            .device_buffers()
            .ok_or_else(|| self.unsupported("allreduce", t.name(), Device::Cpu))?;
        self.check_device("allreduce", t.name(), input)?;
        self.check_device("allreduce", t.name(), output)?;
        Ok((input, output))
    }

    /// Copies a staged tensor's input to the host, prescales and widens it there, and
    /// puts it in a device buffer of the wire type.
    fn stage(
        &self,
        dtype: DType,
        wire: DType,
        buffer: DeviceBuffer<'_>,
        reduction: Reduction,
    ) -> Result<Staged> {
        let mut host = vec![0u8; buffer.len()];
        self.memory.download(&buffer, &mut host)?;
        kernels::prescale(dtype, reduction, &mut host);
        let wide = route::widen(dtype, wire, &host);
        let copy = DeviceBlock::with_contents(&self.dynamic_memory(), &wide)?;
        Ok(Staged { dtype, wire, copy })
    }

    /// Brings a staged reduction's result back: narrows and finishes it on the host and
    /// writes it to `target`.
    fn unstage(
        &self,
        staged: Staged,
        target: DeviceBuffer<'_>,
        reduction: Reduction,
    ) -> Result<()> {
        let wide = staged.copy.contents()?;
        let mut host = route::narrow(staged.dtype, staged.wire, &wide);
        kernels::finish(staged.dtype, reduction, self.size(), &mut host);
        self.memory.upload(&target, &host)
    }
}

/// The pre-multiplying operators of a group, one per datatype, destroyed once queued.
#[derive(Default)]
struct Operators(Vec<(DataType, c_int)>);

impl Operators {
    fn get(
        &mut self,
        launch: &Launch<'_>,
        dtype: DataType,
        factor: f64,
    ) -> std::result::Result<c_int, String> {
        if let Some((_, op)) = self.0.iter().find(|(d, _)| *d == dtype) {
            return Ok(*op);
        }
        let op = launch.pre_mul_sum(dtype, factor)?;
        self.0.push((dtype, op));
        Ok(op)
    }

    fn destroy(self, launch: &Launch<'_>) {
        for (_, op) in self.0 {
            launch.destroy_op(op);
        }
    }
}

/// Queues a reduction of `count` elements from `send` into `recv` (the same address for
/// an in-place one) by `route`.
fn queue_reduction(
    launch: &Launch<'_>,
    operators: &mut Operators,
    route: Route,
    (send, recv): (u64, u64),
    count: usize,
) -> Queued {
    match route {
        Route::Native { dtype, op } => launch.all_reduce(send, recv, count, dtype, op_code(op)),
        Route::PreMulSum { dtype, factor } => {
            let op = operators.get(launch, dtype, factor)?;
            launch.all_reduce(send, recv, count, dtype, op)
        }
        Route::Staged { wire, op } => {
            let dtype = mapping::data_type(wire).map_err(|e| e.to_string())?;
            launch.all_reduce(send, recv, count, dtype, op_code(op))
        }
    }
}

/// The NCCL datatype and operator a route reduces with (the wire's for a staged one).
fn reduce_with(
    launch: &Launch<'_>,
    operators: &mut Operators,
    route: Route,
) -> std::result::Result<(DataType, c_int), String> {
    match route {
        Route::Native { dtype, op } => Ok((dtype, op_code(op))),
        Route::PreMulSum { dtype, factor } => Ok((dtype, operators.get(launch, dtype, factor)?)),
        Route::Staged { wire, op } => Ok((
            mapping::data_type(wire).map_err(|e| e.to_string())?,
            op_code(op),
        )),
    }
}

impl Collective for NcclCollective {
    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn backend(&self) -> &'static str {
        "nccl"
    }

    fn supports(&self, device: Device) -> bool {
        device == Device::Cuda(self.device.ordinal)
    }

    fn device_memory(&self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        self.supports(device).then(|| self.dynamic_memory())
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let (rank, size) = (self.rank(), self.size());
        validate::allreduce(rank, tensors, reduction)?;
        let name = batch_name(tensors);
        let mut work = Vec::with_capacity(tensors.len());
        for t in tensors.iter() {
            let route = route::route(t.dtype(), reduction, size)?;
            let (input, output) = self.reduced(t)?;
            work.push((t.dtype(), t.len(), route, input, output));
        }
        let mut staged = Vec::new();
        for (i, (dtype, len, route, input, _)) in work.iter().enumerate() {
            if let Route::Staged { wire, .. } = route
                && *len > 0
            {
                staged.push((i, self.stage(*dtype, *wire, *input, reduction)?));
            }
        }
        self.call("allreduce", &name, |launch, _| {
            for (.., input, output) in &work {
                launch.wait_for(input.ready())?;
                launch.wait_for(output.ready())?;
            }
            let mut operators = Operators::default();
            let queued = launch.group(|l| {
                for (i, (_, len, route, input, output)) in
                    work.iter().enumerate().filter(|(_, w)| w.1 > 0)
                {
                    let buffers = match staged.iter_mut().find(|(at, _)| *at == i) {
                        Some((_, s)) => (s.copy.buffer().ptr(), s.copy.buffer().ptr()),
                        None => (input.ptr(), output.ptr()),
                    };
                    queue_reduction(l, &mut operators, *route, buffers, *len)?;
                }
                Ok(())
            });
            operators.destroy(launch);
            queued
        })?;
        let had_staged = !staged.is_empty();
        for (i, s) in staged {
            self.unstage(s, work[i].4, reduction)?;
        }
        if had_staged {
            self.memory.synchronize()?;
        }
        Ok(())
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        let name = batch_name(tensors);
        validate::root(self.rank(), self.size(), root, &name)?;
        let buffers = tensors
            .iter_mut()
            .map(|t| self.output("broadcast", t))
            .collect::<Result<Vec<_>>>()?;
        self.call("broadcast", &name, |launch, _| {
            for b in &buffers {
                launch.wait_for(b.ready())?;
            }
            launch.group(|l| {
                buffers
                    .iter()
                    .filter(|b| !b.is_empty())
                    .try_for_each(|b| l.broadcast(b.ptr(), b.len(), root))
            })
        })
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let (rank, size) = (self.rank(), self.size());
        validate::allgather(rank, size, input, output, counts)?;
        let (src, dst) = (
            self.input("allgather", input)?,
            self.output("allgather", output)?,
        );
        let width = input.dtype().size();
        let at = offsets(counts, width);
        let mine = counts[rank] * width;
        self.call("allgather", input.name(), |launch, _| {
            launch.wait_for(src.ready())?;
            launch.wait_for(dst.ready())?;
            if counts.iter().all(|c| *c == counts[0]) {
                return if mine == 0 {
                    Ok(())
                } else {
                    launch.group(|l| l.all_gather(src.ptr(), dst.ptr(), mine))
                };
            }
            // Uneven: each rank's block sent to every other, straight to its place.
            launch.group(|l| {
                for peer in (0..size).filter(|p| *p != rank) {
                    if mine > 0 {
                        l.send(src.ptr(), mine, peer)?;
                    }
                    if counts[peer] > 0 {
                        l.recv(dst.ptr() + at[peer] as u64, counts[peer] * width, peer)?;
                    }
                }
                Ok(())
            })?;
            if mine > 0 {
                launch.copy(dst.ptr() + at[rank] as u64, src.ptr(), mine)?;
            }
            Ok(())
        })
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let (rank, size) = (self.rank(), self.size());
        validate::alltoall(rank, size, input, send_counts, output, recv_counts)?;
        let (src, dst) = (
            self.input("alltoall", input)?,
            self.output("alltoall", output)?,
        );
        let width = input.dtype().size();
        let (sent_at, received_at) = (offsets(send_counts, width), offsets(recv_counts, width));
        self.call("alltoall", input.name(), |launch, _| {
            launch.wait_for(src.ready())?;
            launch.wait_for(dst.ready())?;
            launch.group(|l| {
                for peer in (0..size).filter(|p| *p != rank) {
                    if send_counts[peer] > 0 {
                        l.send(
                            src.ptr() + sent_at[peer] as u64,
                            send_counts[peer] * width,
                            peer,
                        )?;
                    }
                    if recv_counts[peer] > 0 {
                        l.recv(
                            dst.ptr() + received_at[peer] as u64,
                            recv_counts[peer] * width,
                            peer,
                        )?;
                    }
                }
                Ok(())
            })?;
            let own = send_counts[rank] * width;
            if own > 0 {
                launch.copy(
                    dst.ptr() + received_at[rank] as u64,
                    src.ptr() + sent_at[rank] as u64,
                    own,
                )?;
            }
            Ok(())
        })
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let (rank, size) = (self.rank(), self.size());
        validate::reducescatter(rank, size, input, output, counts, reduction)?;
        let dtype = input.dtype();
        let route = route::route(dtype, reduction, size)?;
        let (src, dst) = (
            self.input("reducescatter", input)?,
            self.output("reducescatter", output)?,
        );
        let total: usize = counts.iter().sum();
        // A staged reduction runs on copies of the wire type, in and out.
        let staged = match route {
            Route::Staged { wire, .. } if total > 0 => {
                let into = self.stage(dtype, wire, src, reduction)?;
                let out = DeviceBlock::alloc(&self.dynamic_memory(), counts[rank] * wire.size())?;
                Some((into, out))
            }
            _ => None,
        };
        let width = match route {
            Route::Staged { wire, .. } => wire.size(),
            _ => dtype.size(),
        };
        let at = offsets(counts, width);
        let mut staged = staged;
        let (send, recv) = match &mut staged {
            Some((into, out)) => (into.copy.buffer().ptr(), out.buffer().ptr()),
            None => (src.ptr(), dst.ptr()),
        };
        self.call("reducescatter", input.name(), |launch, _| {
            launch.wait_for(src.ready())?;
            launch.wait_for(dst.ready())?;
            if total == 0 {
                return Ok(());
            }
            let mut operators = Operators::default();
            let queued = reduce_with(launch, &mut operators, route).and_then(|(dtype, op)| {
                if counts.iter().all(|c| *c == counts[0]) {
                    return launch.group(|l| l.reduce_scatter(send, recv, counts[0], dtype, op));
                }
                // Uneven blocks: one reduce per block, onto its rank, in one group.
                launch.group(|l| {
                    for (r, count) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                        let block = send + at[r] as u64;
                        let into = if r == rank { recv } else { block };
                        l.reduce(block, into, *count, dtype, op, r)?;
                    }
                    Ok(())
                })
            });
            operators.destroy(launch);
            queued
        })?;
        if let Some((into, out)) = staged {
            let host = out.contents()?;
            let mut result = route::narrow(dtype, into.wire, &host);
            kernels::finish(dtype, reduction, size, &mut result);
            self.memory.upload(&dst, &result)?;
            self.memory.synchronize()?;
        }
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        self.call("barrier", "", |launch, group| {
            let scratch = group.scratch.buffer().ptr();
            launch.all_reduce(
                scratch,
                scratch,
                1,
                DataType::Int32,
                op_code(mapping::RedOp::Sum),
            )
        })
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        Ok(self
            .split_members(members)?
            .map(|sub| Box::new(sub) as Box<dyn Collective>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_start_where_the_previous_ones_end() {
        assert_eq!(offsets(&[2, 0, 3], 4), [0, 8, 8]);
    }
}
