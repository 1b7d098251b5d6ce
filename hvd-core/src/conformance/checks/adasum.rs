//! Adasum over the transport: the recursion of [`crate::adasum`] needs an exchange with
//! one peer (alltoall with every other count zero) and small f64 sums, and must give the
//! pairwise combination applied level by level. Adasum computes on host memory, so on
//! device memory the check is that a device tensor is refused by name, before any call.

use super::super::context::{Check, Context, call, compare};
use super::contribution;
use crate::{DType, ReduceOp, TensorMut, adasum};

/// Lengths of the batch: uneven halves, one element, none.
const LENS: [usize; 4] = [1001, 1, 0, 64];
const DTYPES: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

/// What every rank should hold: the ranks' contributions combined two by two, then pairs
/// of pairs, with [`adasum::pair`] rounding in the tensor's dtype as each level does.
fn expected(dtype: DType, size: usize, len: usize, salt: usize) -> Vec<u8> {
    let mut level: Vec<Vec<u8>> = (0..size)
        .map(|r| contribution(dtype, ReduceOp::Sum, r, len, salt))
        .collect();
    while level.len() > 1 {
        level = level
            .chunks_mut(2)
            .map(|pair| {
                let (a, b) = pair.split_at_mut(1);
                if let Some(kind) = adasum::Floating::new(dtype) {
                    adasum::pair(kind, &mut a[0], &b[0]);
                }
                std::mem::take(&mut a[0])
            })
            .collect();
    }
    level.remove(0)
}

fn batch(cx: &Context<'_>) -> Result<(), String> {
    let (rank, size) = (cx.rank(), cx.size());
    let names: Vec<String> = (0..LENS.len() * DTYPES.len())
        .map(|i| format!("adasum.{i}"))
        .collect();
    let cases: Vec<(DType, usize, usize)> = DTYPES
        .iter()
        .flat_map(|&d| LENS.iter().map(move |&l| (d, l)))
        .enumerate()
        .map(|(salt, (d, l))| (d, l, salt))
        .collect();
    let mut data: Vec<Vec<u8>> = cases
        .iter()
        .map(|&(dtype, len, salt)| contribution(dtype, ReduceOp::Sum, rank, len, salt))
        .collect();
    let mut views = data
        .iter_mut()
        .zip(&cases)
        .zip(&names)
        .map(|((bytes, &(dtype, len, _)), name)| {
            TensorMut::from_bytes(name, dtype, vec![len], bytes)
        })
        .collect::<crate::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    call("adasum", adasum::allreduce(cx.group(), &mut views))?;
    drop(views);
    for ((bytes, &(dtype, len, salt)), name) in data.iter().zip(&cases).zip(&names) {
        cx.verify(compare(
            name,
            dtype,
            &expected(dtype, size, len, salt),
            bytes,
        ));
    }
    Ok(())
}

/// A tensor on the device under test is refused with the reason, on every rank alike.
fn refused_on_device(cx: &Context<'_>) -> Result<(), String> {
    let mut buffer = cx.buffer(vec![0; 16])?;
    let mut view = cx.view_mut(&mut buffer, "g", DType::F32, vec![4])?;
    let device = view.device();
    let reason = format!("Adasum runs on host memory; this tensor is on {device}");
    match adasum::allreduce(cx.group(), std::slice::from_mut(&mut view)) {
        Err(e) if e.to_string().contains(&reason) => Ok(()),
        other => Err(format!(
            "Adasum of a tensor on {device} should be refused ({reason}), got {other:?}"
        )),
    }
}

pub(super) fn checks() -> Vec<Check> {
    vec![Check::new("adasum recursive pairwise combination", |cx| {
        if cx.on_device() {
            return refused_on_device(cx);
        }
        if cx.size().is_power_of_two() {
            return batch(cx);
        }
        let mut data = vec![0f32; 4];
        match adasum::allreduce(cx.group(), &mut [TensorMut::from_slice("g", &mut data)]) {
            Err(e) if e.to_string().contains("power-of-two number of ranks") => Ok(()),
            other => Err(format!(
                "Adasum over {} ranks should be refused, got {other:?}",
                cx.size()
            )),
        }
    })]
}
