//! Bad calls: every rank gets the documented error before any byte moves.

use super::super::context::Check;
use crate::{DType, ReduceOp, Reduction};

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
            let mut mask = cx.buffer(vec![1u8; 4])?;
            let mut t = [cx.view_mut(&mut mask, "mask", DType::Bool, vec![4])?];
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
            let mut v = cx.buffer(vec![0; 12])?;
            let n = cx.size();
            expect_error(
                "broadcast from a rank that does not exist",
                cx.group()
                    .broadcast(&mut [cx.view_mut(&mut v, "w", DType::F32, vec![3])?], n),
                format!(
                    "rank {}: invalid broadcast of tensor 'w': root rank {n} does not exist in a group of {n}",
                    cx.rank()
                ),
            )
        }),
        Check::new("error: allgather output too small", |cx| {
            let short = 2 * cx.size() - 1;
            let mut input = cx.buffer(vec![1; 8])?;
            let mut out = cx.buffer(vec![0; 4 * short])?;
            expect_error(
                "allgather into a short output",
                cx.group().allgather(
                    &cx.view(&mut input, "g", DType::I32, vec![2])?,
                    &mut cx.view_mut(&mut out, "g", DType::I32, vec![short])?,
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
            let mut input = cx.buffer(vec![1])?;
            let mut out = cx.buffer(vec![0])?;
            let n = cx.size();
            expect_error(
                "alltoall with one count too many",
                cx.group().alltoall(
                    &cx.view(&mut input, "a", DType::U8, vec![1])?,
                    &vec![0; n + 1],
                    &mut cx.view_mut(&mut out, "a", DType::U8, vec![1])?,
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
