//! The checks of the suite, grouped by operation, and the data helpers they share.

mod allreduce;
mod errors;
mod groups;
mod movement;
mod reducescatter;

use super::context::Check;
use super::values::{encode, value};
use crate::{DType, ReduceOp, Reduction, kernels};

/// Every check, in the order they run.
pub(super) fn all() -> Vec<Check> {
    let mut checks = Vec::new();
    checks.extend(errors::checks());
    checks.extend(allreduce::checks());
    checks.extend(movement::checks());
    checks.extend(reducescatter::checks());
    checks.extend(groups::checks());
    checks
}

/// The values repeat with this period in the element index (lcm of the moduli in
/// [`value`]), which lets large tensors be built and checked by copying one period.
const PERIOD: usize = 66;

/// Repeats `block` (whole elements of `width` bytes) until it is `len` elements long.
fn repeat(block: Vec<u8>, width: usize, len: usize) -> Vec<u8> {
    let total = len * width;
    let mut out = block;
    out.truncate(total);
    while out.len() < total {
        let take = out.len().min(total - out.len());
        out.extend_from_within(..take);
    }
    out
}

/// What `rank` contributes to a check: `len` elements of `dtype`.
fn contribution(dtype: DType, op: ReduceOp, rank: usize, len: usize, salt: usize) -> Vec<u8> {
    let block = encode(
        dtype,
        (0..len.min(PERIOD)).map(|i| value(dtype, op, rank, i, salt)),
    );
    repeat(block, dtype.size(), len)
}

/// The result of reducing every rank's contribution with `reduction`, per the kernels'
/// semantics: prescale each contribution, combine in rank order, finish.
fn reduced(dtype: DType, reduction: Reduction, size: usize, len: usize, salt: usize) -> Vec<u8> {
    let block_len = len.min(PERIOD);
    let mut acc = Vec::new();
    for rank in 0..size {
        let mut c = contribution(dtype, reduction.op, rank, block_len, salt);
        kernels::prescale(dtype, reduction, &mut c);
        if rank == 0 {
            acc = c;
        } else {
            kernels::reduce_into(dtype, reduction.op, &mut acc, &c);
        }
    }
    kernels::finish(dtype, reduction, size, &mut acc);
    repeat(acc, dtype.size(), len)
}

/// Bytes that no check expects, to fill outputs before a call so that a transport that
/// leaves them untouched is caught.
fn poison(bytes: usize) -> Vec<u8> {
    vec![0xA5; bytes]
}
