//! Operations that move data without reducing it: broadcast, allgather, alltoall.

use super::super::context::{Check, Context, call, compare};
use super::{contribution, poison};
use crate::{DType, ReduceOp};

/// Broadcasts a batch from `root` and checks every tensor equals the root's.
fn broadcast_from(cx: &Context<'_>, root: usize, tensors: &[(DType, usize)]) -> Result<(), String> {
    let rank = cx.rank();
    let names: Vec<String> = (0..tensors.len()).map(|i| format!("b{i}")).collect();
    let expected: Vec<Vec<u8>> = tensors
        .iter()
        .enumerate()
        .map(|(i, (d, len))| contribution(*d, ReduceOp::Sum, root, *len, i))
        .collect();
    let mut buffers = expected
        .iter()
        .map(|e| {
            cx.buffer(if rank == root {
                e.clone()
            } else {
                poison(e.len())
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut views = Vec::new();
    for ((buf, (dtype, len)), name) in buffers.iter_mut().zip(tensors).zip(&names) {
        views.push(cx.view_mut(buf, name, *dtype, vec![*len])?);
    }
    call("broadcast", cx.group().broadcast(&mut views, root))?;
    drop(views);
    for (i, (dtype, _)) in tensors.iter().enumerate() {
        let actual = cx.contents(&mut buffers[i])?;
        cx.verify(
            compare(&names[i], *dtype, &expected[i], &actual)
                .map_err(|e| format!("root {root}: {e}")),
        );
    }
    Ok(())
}

/// Allgathers `counts[r]` elements from each rank and checks the concatenation.
fn allgather_counts(cx: &Context<'_>, dtype: DType, counts: &[usize]) -> Result<(), String> {
    let rank = cx.rank();
    let mut input = cx.buffer(contribution(dtype, ReduceOp::Sum, rank, counts[rank], 3))?;
    let total: usize = counts.iter().sum();
    let mut output = cx.buffer(poison(total * dtype.size()))?;
    call(
        "allgather",
        cx.group().allgather(
            &cx.view(&mut input, "g", dtype, vec![counts[rank]])?,
            &mut cx.view_mut(&mut output, "g", dtype, vec![total])?,
            counts,
        ),
    )?;
    let output = cx.contents(&mut output)?;
    let expected: Vec<u8> = (0..counts.len())
        .flat_map(|r| contribution(dtype, ReduceOp::Sum, r, counts[r], 3))
        .collect();
    cx.verify(
        compare("g", dtype, &expected, &output)
            .map_err(|e| format!("{dtype} counts {counts:?}: {e}")),
    );
    Ok(())
}

/// The element rank `src` sends to rank `dst` at position `k`: all three recoverable.
fn tagged(src: usize, dst: usize, k: usize) -> i32 {
    (src * 1_000_000 + dst * 10_000 + k) as i32
}

/// Alltoall of i32 values tagged with (source, destination, position), so that a value
/// in the wrong place is identified.
fn alltoall_counts(cx: &Context<'_>, sends: impl Fn(usize, usize) -> usize) -> Result<(), String> {
    let (rank, size) = (cx.rank(), cx.size());
    let send_counts: Vec<usize> = (0..size).map(|dst| sends(rank, dst)).collect();
    let recv_counts: Vec<usize> = (0..size).map(|src| sends(src, rank)).collect();
    let input: Vec<i32> = (0..size)
        .flat_map(|dst| (0..send_counts[dst]).map(move |k| tagged(rank, dst, k)))
        .collect();
    let expected: Vec<i32> = (0..size)
        .flat_map(|src| (0..recv_counts[src]).map(move |k| tagged(src, rank, k)))
        .collect();
    let bytes =
        |values: &[i32]| -> Vec<u8> { values.iter().flat_map(|v| v.to_ne_bytes()).collect() };
    let mut input = cx.buffer(bytes(&input))?;
    let mut output = cx.buffer(bytes(&vec![-1; expected.len()]))?;
    let (sent, received) = (send_counts.iter().sum(), expected.len());
    call(
        "alltoall",
        cx.group().alltoall(
            &cx.view(&mut input, "a2a", DType::I32, vec![sent])?,
            &send_counts,
            &mut cx.view_mut(&mut output, "a2a", DType::I32, vec![received])?,
            &recv_counts,
        ),
    )?;
    let output: Vec<i32> = cx
        .contents(&mut output)?
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if let Some(i) = (0..expected.len()).find(|i| expected[*i] != output[*i]) {
        cx.verify(Err(format!(
            "send counts {send_counts:?}, receive counts {recv_counts:?}: element {i}: expected {} (from rank {}), got {}",
            expected[i],
            expected[i] / 1_000_000,
            output[i]
        )));
    }
    Ok(())
}

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check::new("broadcast from every root", |cx| {
            let batch = [
                (DType::F32, 1001),
                (DType::U8, 0),
                (DType::I64, 3),
                (DType::Bool, 9),
                (DType::F16, 1),
            ];
            (0..cx.size()).try_for_each(|root| broadcast_from(cx, root, &batch))
        }),
        Check::new("broadcast large", |cx| {
            let len = cx.options().max_bytes / 4;
            broadcast_from(cx, cx.size() - 1, &[(DType::F32, len)])
        }),
        Check::new("allgather every dtype, uneven and zero counts", |cx| {
            let size = cx.size();
            let uneven: Vec<usize> = (0..size)
                .map(|r| if r == 0 { 0 } else { (r * 5 + 3) % 7 + 1 })
                .collect();
            for dtype in DType::ALL {
                allgather_counts(cx, dtype, &uneven)?;
            }
            allgather_counts(cx, DType::F32, &vec![0; size])?;
            allgather_counts(cx, DType::F64, &vec![1; size])
        }),
        Check::new("allgather large", |cx| {
            let size = cx.size();
            let per_rank = cx.options().max_bytes / 4 / size;
            let counts: Vec<usize> = (0..size).map(|r| per_rank - r).collect();
            allgather_counts(cx, DType::F32, &counts)
        }),
        Check::new("alltoall uneven and zero splits", |cx| {
            alltoall_counts(cx, |src, dst| (src + 2 * dst) % 4)?;
            alltoall_counts(cx, |_, _| 0)?;
            alltoall_counts(cx, |src, dst| if src == dst { 5 } else { 0 })?;
            alltoall_counts(cx, |src, _| src * 3 + 1)
        }),
        Check::new("alltoall large", |cx| {
            let per_pair = cx.options().max_bytes / 4 / cx.size() / cx.size();
            alltoall_counts(cx, move |src, dst| per_pair - (src + dst) % 2)
        }),
    ]
}
