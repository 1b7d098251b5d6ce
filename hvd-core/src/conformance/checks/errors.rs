//! Bad calls: every rank gets the documented error before any byte moves.

use super::super::context::Check;
use crate::{DType, ReduceOp, Reduction, Tensor, TensorMut};

fn expect_error(what: &str, result: crate::Result<()>, expected: String) -> Result<(), String> {
    match result {
        Ok(()) => Err(format!(
            "{what} succeeded; expected the error \"{expected}\""
        )),
        Err(e) if e.to_string() == expected => Ok(()),
        Err(e) => Err(format!(
            "{what} failed with \"{e}\"; expected \"{expected}\""
        )),
    }
}

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new("error: bool average", |cx| {
            let mut mask = vec![1u8; 4];
            let mut t = [
                TensorMut::from_bytes("mask", DType::Bool, vec![4], &mut mask)
                    .map_err(|e| e.to_string())?,
            ];
            expect_error(
                "bool average allreduce",
                cx.group()
                    .allreduce(&mut t, Reduction::new(ReduceOp::Average)),
                format!(
                    "rank {}: invalid allreduce of tensor 'mask': average is not defined for bool; use max (any rank true) or min (every rank true)",
                    cx.rank()
                ),
            )
        }),
        Check::new("error: broadcast root out of range", |cx| {
            let mut v = vec![0.0f32; 3];
            let n = cx.size();
            expect_error(
                "broadcast from a rank that does not exist",
                cx.group()
                    .broadcast(&mut [TensorMut::from_slice("w", &mut v)], n),
                format!(
                    "rank {}: invalid broadcast of tensor 'w': root rank {n} does not exist in a group of {n}",
                    cx.rank()
                ),
            )
        }),
        Check::new("error: allgather output too small", |cx| {
            let input = [1i32; 2];
            let mut out = vec![0i32; 2 * cx.size() - 1];
            expect_error(
                "allgather into a short output",
                cx.group().allgather(
                    &Tensor::from_slice("g", &input),
                    &mut TensorMut::from_slice("g", &mut out),
                    &vec![2; cx.size()],
                ),
                format!(
                    "rank {}: invalid allgather of tensor 'g': output holds {} elements but the counts need {}",
                    cx.rank(),
                    2 * cx.size() - 1,
                    2 * cx.size()
                ),
            )
        }),
        Check::new("error: alltoall counts for the wrong group size", |cx| {
            let input = [1u8; 1];
            let mut out = [0u8; 1];
            let n = cx.size();
            expect_error(
                "alltoall with one count too many",
                cx.group().alltoall(
                    &Tensor::from_slice("a", &input),
                    &vec![0; n + 1],
                    &mut TensorMut::from_slice("a", &mut out),
                    &vec![0; n],
                ),
                format!(
                    "rank {}: invalid alltoall of tensor 'a': send counts has {} entries for a group of {n} ranks",
                    cx.rank(),
                    n + 1
                ),
            )
        }),
    ]
}
