//! The buffers one benchmarked collective works on, and how to verify its result.

use hvd::{Collective, DType, Reduction, Result, Tensor, TensorMut};
use hvd_core::conformance::{compare, values};

use crate::args::BenchOp;

/// Salt of the check values, so they differ from other suites' patterns.
const SALT: usize = 7;

/// Input and output of one collective of `bytes` total size, on this rank.
pub struct Buffers {
    op: BenchOp,
    dtype: DType,
    reduction: Reduction,
    rank: usize,
    np: usize,
    /// Elements each rank contributes per block (allgather, alltoall, reducescatter).
    block: usize,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl Buffers {
    /// Buffers for `op` over `bytes` (rounded down to whole blocks, at least one element
    /// per rank), holding this rank's check values.
    pub fn new(
        op: BenchOp,
        dtype: DType,
        reduction: Reduction,
        bytes: usize,
        rank: usize,
        np: usize,
    ) -> Self {
        let count = (bytes / dtype.size()).max(1);
        let block = (count / np).max(1);
        let (input_len, output_len) = match op {
            BenchOp::Allreduce | BenchOp::Broadcast => (count, 0),
            BenchOp::Allgather => (block, block * np),
            BenchOp::Alltoall => (block * np, block * np),
            BenchOp::Reducescatter => (block * np, block),
        };
        let input = values::contribution(dtype, reduction.op, rank, input_len, SALT);
        Buffers {
            op,
            dtype,
            reduction,
            rank,
            np,
            block,
            input,
            output: vec![0; output_len * dtype.size()],
        }
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
        let input_len = self.input.len() / dtype.size();
        let output_len = self.output.len() / dtype.size();
        let blocks = vec![block; np];
        match self.op {
            BenchOp::Allreduce => group.allreduce(
                &mut [TensorMut::from_bytes(
                    "bench",
                    dtype,
                    vec![input_len],
                    &mut self.input,
                )?],
                self.reduction,
            ),
            BenchOp::Broadcast => group.broadcast(
                &mut [TensorMut::from_bytes(
                    "bench",
                    dtype,
                    vec![input_len],
                    &mut self.input,
                )?],
                0,
            ),
            BenchOp::Allgather => group.allgather(
                &Tensor::from_bytes("bench", dtype, vec![input_len], &self.input)?,
                &mut TensorMut::from_bytes("bench", dtype, vec![output_len], &mut self.output)?,
                &blocks,
            ),
            BenchOp::Alltoall => group.alltoall(
                &Tensor::from_bytes("bench", dtype, vec![input_len], &self.input)?,
                &blocks,
                &mut TensorMut::from_bytes("bench", dtype, vec![output_len], &mut self.output)?,
                &blocks,
            ),
            BenchOp::Reducescatter => group.reducescatter(
                &Tensor::from_bytes("bench", dtype, vec![input_len], &self.input)?,
                &mut TensorMut::from_bytes("bench", dtype, vec![output_len], &mut self.output)?,
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
                compare("bench", dtype, &expected, &self.input)
            }
            BenchOp::Broadcast => compare(
                "bench",
                dtype,
                &contribution(0, self.input.len() / width),
                &self.input,
            ),
            BenchOp::Allgather => {
                let expected: Vec<u8> = (0..np).flat_map(|r| contribution(r, block)).collect();
                compare("bench", dtype, &expected, &self.output)
            }
            BenchOp::Alltoall => {
                // Block `rank` of every source's input lands at block `source` here.
                let expected: Vec<u8> = (0..np)
                    .flat_map(|source| {
                        let all = contribution(source, block * np);
                        all[rank * block * width..(rank + 1) * block * width].to_vec()
                    })
                    .collect();
                compare("bench", dtype, &expected, &self.output)
            }
            BenchOp::Reducescatter => {
                let whole = values::reduced(dtype, self.reduction, np, block * np, SALT);
                compare(
                    "bench",
                    dtype,
                    &whole[rank * block * width..(rank + 1) * block * width],
                    &self.output,
                )
            }
        }
    }
}
