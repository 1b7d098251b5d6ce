//! The buffers one benchmarked collective works on, and how to verify its result.

use std::sync::Arc;

use hvd::core::{DeviceBlock, DeviceMemory};
use hvd::{Collective, DType, Reduction, Result, Tensor, TensorMut};
use hvd_core::conformance::{compare, values};

use crate::bench_op::BenchOp;

/// Salt of the check values, so they differ from other suites' patterns.
const SALT: usize = 7;

/// Bytes on the host, or in device memory (for a device transport).
enum Storage {
    Host(Vec<u8>),
    Device(DeviceBlock),
}

impl Storage {
    fn new(bytes: Vec<u8>, memory: Option<&Arc<dyn DeviceMemory>>) -> Result<Storage> {
        match memory {
            None => Ok(Storage::Host(bytes)),
            Some(memory) => DeviceBlock::with_contents(memory, &bytes).map(Storage::Device),
        }
    }

    fn len(&self) -> usize {
        match self {
            Storage::Host(bytes) => bytes.len(),
            Storage::Device(block) => block.len(),
        }
    }

    fn view_mut(&mut self, dtype: DType) -> Result<TensorMut<'_>> {
        let len = self.len() / dtype.size();
        match self {
            Storage::Host(bytes) => TensorMut::from_bytes("bench", dtype, vec![len], bytes),
            Storage::Device(block) => {
                TensorMut::from_device("bench", dtype, vec![len], block.buffer())
            }
        }
    }

    fn view(&self, dtype: DType) -> Result<Tensor<'_>> {
        let len = self.len() / dtype.size();
        match self {
            Storage::Host(bytes) => Tensor::from_bytes("bench", dtype, vec![len], bytes),
            Storage::Device(block) => {
                Tensor::from_device("bench", dtype, vec![len], block.buffer())
            }
        }
    }

    /// The bytes, read back from the device when they are there.
    fn contents(&self) -> std::result::Result<Vec<u8>, String> {
        match self {
            Storage::Host(bytes) => Ok(bytes.clone()),
            Storage::Device(block) => block.contents().map_err(|e| e.to_string()),
        }
    }
}

/// Input and output of one collective of `bytes` total size, on this rank.
pub struct Buffers {
    op: BenchOp,
    dtype: DType,
    reduction: Reduction,
    rank: usize,
    np: usize,
    /// Elements each rank contributes per block (allgather, alltoall, reducescatter).
    block: usize,
    input: Storage,
    output: Storage,
}

impl Buffers {
    /// Buffers for `op` over `bytes` (rounded down to whole blocks, at least one element
    /// per rank), holding this rank's check values, in `memory` when given (a device's).
    pub fn new(
        op: BenchOp,
        dtype: DType,
        reduction: Reduction,
        (bytes, rank, np): (usize, usize, usize),
        memory: Option<&Arc<dyn DeviceMemory>>,
    ) -> Result<Self> {
        let count = (bytes / dtype.size()).max(1);
        let block = (count / np).max(1);
        let (input_len, output_len) = match op {
            BenchOp::Allreduce | BenchOp::Broadcast => (count, 0),
            BenchOp::Allgather => (block, block * np),
            BenchOp::Alltoall => (block * np, block * np),
            BenchOp::Reducescatter => (block * np, block),
        };
        let input = values::contribution(dtype, reduction.op, rank, input_len, SALT);
        Ok(Buffers {
            op,
            dtype,
            reduction,
            rank,
            np,
            block,
            input: Storage::new(input, memory)?,
            output: Storage::new(vec![0; output_len * dtype.size()], memory)?,
        })
    }

    /// The bytes the size column reports (nccl-tests' convention: the whole buffer, or
    /// the gathered result for allgather).
    pub fn reported_bytes(&self) -> usize {
        match self.op {
            BenchOp::Allgather => self.output.len(),
            _ => self.input.len(),
        }
    }

    /// Elements in the reported size.
    pub fn reported_count(&self) -> usize {
        self.reported_bytes() / self.dtype.size()
    }

    /// Runs the collective once.
    pub fn run(&mut self, group: &dyn Collective) -> Result<()> {
        let (dtype, np, block) = (self.dtype, self.np, self.block);
        let blocks = vec![block; np];
        match self.op {
            BenchOp::Allreduce => {
                group.allreduce(&mut [self.input.view_mut(dtype)?], self.reduction)
            }
            BenchOp::Broadcast => group.broadcast(&mut [self.input.view_mut(dtype)?], 0),
            BenchOp::Allgather => group.allgather(
                &self.input.view(dtype)?,
                &mut self.output.view_mut(dtype)?,
                &blocks,
            ),
            BenchOp::Alltoall => group.alltoall(
                &self.input.view(dtype)?,
                &blocks,
                &mut self.output.view_mut(dtype)?,
                &blocks,
            ),
            BenchOp::Reducescatter => group.reducescatter(
                &self.input.view(dtype)?,
                &mut self.output.view_mut(dtype)?,
                &blocks,
                self.reduction,
            ),
        }
    }

    /// Compares the result of one [`run`](Self::run) on fresh buffers with what it must be.
    pub fn verify(&self) -> std::result::Result<(), String> {
        let (dtype, np, block, rank) = (self.dtype, self.np, self.block, self.rank);
        let width = dtype.size();
        let contribution =
            |r: usize, len: usize| values::contribution(dtype, self.reduction.op, r, len, SALT);
        match self.op {
            BenchOp::Allreduce => {
                let len = self.input.len() / width;
                let expected = values::reduced(dtype, self.reduction, np, len, SALT);
                compare("bench", dtype, &expected, &self.input.contents()?)
            }
            BenchOp::Broadcast => compare(
                "bench",
                dtype,
                &contribution(0, self.input.len() / width),
                &self.input.contents()?,
            ),
            BenchOp::Allgather => {
                let expected: Vec<u8> = (0..np).flat_map(|r| contribution(r, block)).collect();
                compare("bench", dtype, &expected, &self.output.contents()?)
            }
            BenchOp::Alltoall => {
                // Block `rank` of every source's input lands at block `source` here.
                let expected: Vec<u8> = (0..np)
                    .flat_map(|source| {
                        let all = contribution(source, block * np);
                        all[rank * block * width..(rank + 1) * block * width].to_vec()
                    })
                    .collect();
                compare("bench", dtype, &expected, &self.output.contents()?)
            }
            BenchOp::Reducescatter => {
                let whole = values::reduced(dtype, self.reduction, np, block * np, SALT);
                compare(
                    "bench",
                    dtype,
                    &whole[rank * block * width..(rank + 1) * block * width],
                    &self.output.contents()?,
                )
            }
        }
    }
}
