//! Allreduce: every dtype x op x awkward size, batches, scale factors, large tensors,
//! and many small calls in a row.

use super::super::context::{Check, call, compare};
use super::{contribution, reduced};
use crate::{DType, ReduceOp, Reduction};

/// Element counts that catch edge cases: empty, single, odd, smaller and larger than the
/// group, not divisible by it, and one large enough for ring algorithms.
fn sizes(group: usize) -> Vec<usize> {
    vec![0, 1, 2, 7, group, group + 1, 1023, 65_537]
}

/// Allreduces one tensor per `(dtype, len)` as one batch and verifies every result,
/// prefixing what went wrong with `label`.
fn allreduce_batch(
    cx: &super::super::Context<'_>,
    label: &str,
    tensors: &[(DType, usize)],
    reduction: Reduction,
    salt: usize,
) -> Result<(), String> {
    let (rank, size) = (cx.rank(), cx.size());
    let names: Vec<String> = (0..tensors.len()).map(|i| format!("t{i}")).collect();
    let mut buffers = tensors
        .iter()
        .enumerate()
        .map(|(i, (dtype, len))| {
            cx.buffer(contribution(*dtype, reduction.op, rank, *len, salt + i))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut views = Vec::new();
    for ((buf, (dtype, len)), name) in buffers.iter_mut().zip(tensors).zip(&names) {
        views.push(cx.view_mut(buf, name, *dtype, vec![*len])?);
    }
    call("allreduce", cx.group().allreduce(&mut views, reduction))?;
    drop(views);
    for (i, ((dtype, len), buf)) in tensors.iter().zip(&mut buffers).enumerate() {
        let expected = reduced(*dtype, reduction, size, *len, salt + i);
        let actual = cx.contents(buf)?;
        cx.verify(
            compare(&names[i], *dtype, &expected, &actual).map_err(|e| format!("{label}{e}")),
        );
    }
    Ok(())
}

pub(super) fn checks() -> Vec<Check> {
    let mut checks = Vec::new();
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            if dtype == DType::Bool && op == ReduceOp::Average {
                continue; // refused; see the error checks
            }
            checks.push(Check::new(format!("allreduce {dtype} {op}"), move |cx| {
                for (salt, len) in sizes(cx.size()).into_iter().enumerate() {
                    let label = format!("{len} elements: ");
                    allreduce_batch(cx, &label, &[(dtype, len)], Reduction::new(op), salt)?;
                }
                Ok(())
            }));
        }
    }
    checks.push(Check::new("allreduce batch of mixed dtypes", |cx| {
        let batch = [
            (DType::F32, 13),
            (DType::I32, 0),
            (DType::F64, 1000),
            (DType::U8, 5),
            (DType::BF16, 77),
            (DType::F16, 3),
        ];
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Product] {
            allreduce_batch(cx, &format!("{op}: "), &batch, Reduction::new(op), 5)?;
        }
        Ok(())
    }));
    checks.push(Check::new("allreduce prescale and postscale", |cx| {
        let scaled = [
            Reduction::new(ReduceOp::Average)
                .with_prescale(0.5)
                .with_postscale(4.0),
            Reduction::new(ReduceOp::Sum)
                .with_prescale(2.0)
                .with_postscale(0.25),
            Reduction::new(ReduceOp::Max).with_postscale(-3.0),
        ];
        let dtypes = [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::U8,
            DType::I64,
        ];
        for reduction in scaled {
            for dtype in dtypes {
                allreduce_batch(
                    cx,
                    &format!("{reduction:?}: "),
                    &[(dtype, 101)],
                    reduction,
                    9,
                )?;
            }
        }
        Ok(())
    }));
    checks.push(Check::new("allreduce large f32 sum", |cx| {
        let len = cx.options().max_bytes / 4 - 1;
        allreduce_batch(
            cx,
            "",
            &[(DType::F32, len)],
            Reduction::new(ReduceOp::Sum),
            1,
        )
    }));
    checks.push(Check::new("allreduce large bf16 average", |cx| {
        let len = cx.options().max_bytes / 8 + 3;
        allreduce_batch(
            cx,
            "",
            &[(DType::BF16, len)],
            Reduction::new(ReduceOp::Average),
            2,
        )
    }));
    checks.push(Check::new("allreduce many small in a row", |cx| {
        for i in 0..cx.options().repeats {
            allreduce_batch(
                cx,
                &format!("call {i}: "),
                &[(DType::F32, 4)],
                Reduction::new(ReduceOp::Sum),
                i,
            )?;
        }
        Ok(())
    }));
    checks
}
