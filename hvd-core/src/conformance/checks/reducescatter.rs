//! Reducescatter: uneven and empty blocks, several dtypes and ops, a large tensor.

use super::super::context::{Check, Context, call, compare};
use super::{contribution, poison, reduced};
use crate::{DType, ReduceOp, Reduction};

fn reducescatter_counts(
    cx: &Context<'_>,
    dtype: DType,
    reduction: Reduction,
    counts: &[usize],
) -> Result<(), String> {
    let (rank, size) = (cx.rank(), cx.size());
    let total: usize = counts.iter().sum();
    let mut input = cx.buffer(contribution(dtype, reduction.op, rank, total, 4))?;
    let mut output = cx.buffer(poison(counts[rank] * dtype.size()))?;
    call(
        "reducescatter",
        cx.group().reducescatter(
            &cx.view(&mut input, "rs", dtype, vec![total])?,
            &mut cx.view_mut(&mut output, "rs", dtype, vec![counts[rank]])?,
            counts,
            reduction,
        ),
    )?;
    let output = cx.contents(&mut output)?;
    let whole = reduced(dtype, reduction, size, total, 4);
    let start = counts[..rank].iter().sum::<usize>() * dtype.size();
    let expected = &whole[start..start + counts[rank] * dtype.size()];
    cx.verify(
        compare("rs", dtype, expected, &output)
            .map_err(|e| format!("{dtype} {reduction:?} counts {counts:?}: {e}")),
    );
    Ok(())
}

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new("reducescatter uneven and empty blocks", |cx| {
            let size = cx.size();
            let uneven: Vec<usize> = (0..size).map(|r| (r * 3) % 4 + (r % 2) * 17).collect();
            let cases = [
                (DType::F32, ReduceOp::Sum),
                (DType::I32, ReduceOp::Max),
                (DType::BF16, ReduceOp::Average),
                (DType::U8, ReduceOp::Min),
                (DType::F64, ReduceOp::Product),
                (DType::Bool, ReduceOp::Max),
            ];
            for (dtype, op) in cases {
                reducescatter_counts(cx, dtype, Reduction::new(op), &uneven)?;
                reducescatter_counts(cx, dtype, Reduction::new(op), &vec![1; size])?;
            }
            reducescatter_counts(
                cx,
                DType::F32,
                Reduction::new(ReduceOp::Sum).with_prescale(0.5),
                &vec![0; size],
            )
        }),
        Check::new("reducescatter large", |cx| {
            let size = cx.size();
            let block = cx.options().max_bytes / 4 / size;
            let counts: Vec<usize> = (0..size).map(|r| block + r % 2).collect();
            reducescatter_counts(cx, DType::F32, Reduction::new(ReduceOp::Sum), &counts)
        }),
    ]
}
