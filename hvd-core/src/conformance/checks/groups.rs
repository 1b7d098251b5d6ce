//! Barrier and sub-groups (process sets).

use super::super::context::{Check, Context, call};
use crate::{Collective, DType, ReduceOp, Reduction};

fn encode(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn decode(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or_default()))
        .collect()
}

/// Checks a sub-group made of `members` (parent ranks, in sub-group rank order): its
/// topology, and that allreduce, broadcast, allgather and barrier involve only members.
fn exercise(cx: &Context<'_>, sub: &dyn Collective, members: &[usize]) -> Result<(), String> {
    let parent_rank = cx.rank();
    let t = sub.topology();
    let expected_rank = members.iter().position(|m| *m == parent_rank);
    if Some(t.rank()) != expected_rank || t.size() != members.len() {
        cx.verify(Err(format!(
            "members {members:?}: sub-group says rank {} of {}, expected rank {expected_rank:?} of {}",
            t.rank(),
            t.size(),
            members.len()
        )));
    }
    let mut sum = cx.buffer(encode(&[parent_rank as i64 + 1]))?;
    call(
        "sub-group allreduce",
        sub.allreduce(
            &mut [cx.view_mut(&mut sum, "sub.sum", DType::I64, vec![1])?],
            Reduction::new(ReduceOp::Sum),
        ),
    )?;
    let sum = decode(&cx.contents(&mut sum)?);
    let want: i64 = members.iter().map(|m| *m as i64 + 1).sum();
    if sum[0] != want {
        cx.verify(Err(format!(
            "members {members:?}: allreduce sum gave {}, expected {want}",
            sum[0]
        )));
    }
    let mut root_value = cx.buffer(encode(&[if t.rank() == 0 {
        members[0] as i64
    } else {
        -1
    }]))?;
    call(
        "sub-group broadcast",
        sub.broadcast(
            &mut [cx.view_mut(&mut root_value, "sub.bcast", DType::I64, vec![1])?],
            0,
        ),
    )?;
    let root_value = decode(&cx.contents(&mut root_value)?);
    if root_value[0] != members[0] as i64 {
        cx.verify(Err(format!(
            "members {members:?}: broadcast from sub-group rank 0 gave {}, expected {}",
            root_value[0], members[0]
        )));
    }
    let mut mine = cx.buffer(encode(&[parent_rank as i64]))?;
    let mut all = cx.buffer(encode(&vec![-1; members.len()]))?;
    call(
        "sub-group allgather",
        sub.allgather(
            &cx.view(&mut mine, "sub.gather", DType::I64, vec![1])?,
            &mut cx.view_mut(&mut all, "sub.gather", DType::I64, vec![members.len()])?,
            &vec![1; members.len()],
        ),
    )?;
    let all = decode(&cx.contents(&mut all)?);
    let want: Vec<i64> = members.iter().map(|m| *m as i64).collect();
    if all != want {
        cx.verify(Err(format!(
            "members {members:?}: allgather gave {all:?}, expected {want:?}"
        )));
    }
    call("sub-group barrier", sub.barrier())
}

/// Splits off `members`; members exercise the sub-group, others check they got none.
fn split_and_exercise(cx: &Context<'_>, members: &[usize]) -> Result<(), String> {
    let rank = cx.rank();
    let sub = cx
        .group()
        .split(members)
        .map_err(|e| format!("split {members:?} returned an error: {e}"))?;
    match (sub, members.contains(&rank)) {
        (Some(sub), true) => exercise(cx, sub.as_ref(), members),
        (None, false) => Ok(()),
        (Some(_), false) => Err(format!(
            "split {members:?} gave a sub-group to non-member rank {rank}"
        )),
        (None, true) => Err(format!(
            "split {members:?} gave no sub-group to member rank {rank}"
        )),
    }
}

pub(super) fn checks() -> Vec<Check> {
    let mut checks = vec![Check::new("barrier", |cx| {
        (0..10).try_for_each(|i| call(&format!("barrier {i}"), cx.group().barrier()))
    })];
    checks.push(Check::new("split into sub-groups", |cx| {
        if !cx.options().subgroups {
            return Ok(());
        }
        let size = cx.size();
        let evens: Vec<usize> = (0..size).step_by(2).collect();
        let odds_reversed: Vec<usize> = (1..size).step_by(2).rev().collect();
        split_and_exercise(cx, &evens)?;
        if !odds_reversed.is_empty() {
            split_and_exercise(cx, &odds_reversed)?;
        }
        split_and_exercise(cx, &[size - 1])?;
        split_and_exercise(cx, &(0..size).collect::<Vec<_>>())?;
        // The parent still works after its sub-groups.
        let mut one = cx.buffer(encode(&[1]))?;
        call(
            "parent allreduce after split",
            cx.group().allreduce(
                &mut [cx.view_mut(&mut one, "after.split", DType::I64, vec![1])?],
                Reduction::new(ReduceOp::Sum),
            ),
        )?;
        let one = decode(&cx.contents(&mut one)?);
        if one[0] != size as i64 {
            cx.verify(Err(format!(
                "parent allreduce after split gave {}, expected {size}",
                one[0]
            )));
        }
        Ok(())
    }));
    checks
}
