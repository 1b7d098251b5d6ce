//! Argument checks every transport runs before it moves a byte, so that a bad call gets
//! the same clear error from every transport.

use crate::{DType, Error, ReduceOp, Reduction, Result, Tensor, TensorMut};

/// Checks a batch for allreduce: the reduction is defined for every dtype in it.
pub fn allreduce(rank: usize, tensors: &[TensorMut<'_>], reduction: Reduction) -> Result<()> {
    for t in tensors {
        reduction_dtype(rank, "allreduce", t.name(), t.dtype(), reduction)?;
    }
    Ok(())
}

/// Checks that `reduction` is defined for `dtype` and its factors are finite.
pub fn reduction_dtype(
    rank: usize,
    op: &'static str,
    tensor: &str,
    dtype: DType,
    reduction: Reduction,
) -> Result<()> {
    if dtype == DType::Bool && reduction.op == ReduceOp::Average {
        return Err(Error::invalid(
            rank,
            op,
            tensor,
            "average is not defined for bool; use max (any rank true) or min (every rank true)",
        ));
    }
    for (what, factor) in [
        ("prescale", reduction.prescale),
        ("postscale", reduction.postscale),
    ] {
        if !factor.is_finite() {
            return Err(Error::invalid(
                rank,
                op,
                tensor,
                format!("{what} factor must be finite, got {factor}"),
            ));
        }
    }
    Ok(())
}

/// Checks a broadcast root.
pub fn root(rank: usize, size: usize, root: usize, tensor: &str) -> Result<()> {
    if root >= size {
        return Err(Error::invalid(
            rank,
            "broadcast",
            tensor,
            format!("root rank {root} does not exist in a group of {size}"),
        ));
    }
    Ok(())
}

fn per_rank_counts(
    rank: usize,
    size: usize,
    op: &'static str,
    tensor: &str,
    what: &str,
    counts: &[usize],
) -> Result<usize> {
    if counts.len() != size {
        return Err(Error::invalid(
            rank,
            op,
            tensor,
            format!(
                "{what} has {} entries for a group of {size} ranks",
                counts.len()
            ),
        ));
    }
    counts
        .iter()
        .try_fold(0usize, |sum, c| sum.checked_add(*c))
        .ok_or_else(|| Error::invalid(rank, op, tensor, format!("{what} overflow usize")))
}

fn same_dtype(
    rank: usize,
    op: &'static str,
    input: &Tensor<'_>,
    output: &TensorMut<'_>,
) -> Result<()> {
    if input.dtype() != output.dtype() {
        return Err(Error::invalid(
            rank,
            op,
            input.name(),
            format!(
                "input is {} but output '{}' is {}",
                input.dtype(),
                output.name(),
                output.dtype()
            ),
        ));
    }
    Ok(())
}

fn length(
    rank: usize,
    op: &'static str,
    tensor: &str,
    what: &str,
    expected: usize,
    actual: usize,
) -> Result<()> {
    if expected != actual {
        return Err(Error::invalid(
            rank,
            op,
            tensor,
            format!("{what} holds {actual} elements but the counts need {expected}"),
        ));
    }
    Ok(())
}

/// Checks allgather arguments: one count per rank, this rank's input matches its count,
/// the output holds the total.
pub fn allgather(
    rank: usize,
    size: usize,
    input: &Tensor<'_>,
    output: &TensorMut<'_>,
    counts: &[usize],
) -> Result<()> {
    let op = "allgather";
    same_dtype(rank, op, input, output)?;
    let total = per_rank_counts(rank, size, op, input.name(), "counts", counts)?;
    length(rank, op, input.name(), "input", counts[rank], input.len())?;
    length(rank, op, input.name(), "output", total, output.len())
}

/// Checks alltoall arguments: per-rank counts, input and output lengths.
pub fn alltoall(
    rank: usize,
    size: usize,
    input: &Tensor<'_>,
    send_counts: &[usize],
    output: &TensorMut<'_>,
    recv_counts: &[usize],
) -> Result<()> {
    let op = "alltoall";
    same_dtype(rank, op, input, output)?;
    let sent = per_rank_counts(rank, size, op, input.name(), "send counts", send_counts)?;
    let received = per_rank_counts(rank, size, op, input.name(), "receive counts", recv_counts)?;
    length(rank, op, input.name(), "input", sent, input.len())?;
    length(rank, op, input.name(), "output", received, output.len())?;
    // The one pair of counts a rank can check alone: what it sends itself.
    if send_counts[rank] != recv_counts[rank] {
        return Err(Error::invalid(
            rank,
            op,
            input.name(),
            format!(
                "this rank sends itself {} elements but expects {} from itself",
                send_counts[rank], recv_counts[rank]
            ),
        ));
    }
    Ok(())
}

/// Checks reducescatter arguments: per-rank block counts, input holds all blocks, output
/// holds this rank's block, and the reduction is defined for the dtype.
pub fn reducescatter(
    rank: usize,
    size: usize,
    input: &Tensor<'_>,
    output: &TensorMut<'_>,
    counts: &[usize],
    reduction: Reduction,
) -> Result<()> {
    let op = "reducescatter";
    same_dtype(rank, op, input, output)?;
    reduction_dtype(rank, op, input.name(), input.dtype(), reduction)?;
    let total = per_rank_counts(rank, size, op, input.name(), "counts", counts)?;
    length(rank, op, input.name(), "input", total, input.len())?;
    length(rank, op, input.name(), "output", counts[rank], output.len())
}

/// Checks sub-group members: non-empty, in range, no repeats.
pub fn members(rank: usize, size: usize, members: &[usize]) -> Result<()> {
    let bad = |reason: String| Err(Error::invalid(rank, "split", "process set", reason));
    if members.is_empty() {
        return bad("a process set needs at least one rank".into());
    }
    let mut seen = vec![false; size];
    for m in members {
        match seen.get_mut(*m) {
            None => return bad(format!("rank {m} does not exist in a group of {size}")),
            Some(true) => return bad(format!("rank {m} is listed twice")),
            Some(s) => *s = true,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bool_average_is_refused_with_the_alternatives() {
        let mut v = vec![1u8; 3];
        let t = TensorMut::from_bytes("mask", DType::Bool, vec![3], &mut v).unwrap();
        let err = allreduce(2, &[t], Reduction::new(ReduceOp::Average)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rank 2: invalid allreduce of tensor 'mask': average is not defined for bool; use max (any rank true) or min (every rank true)"
        );
    }

    #[test]
    fn allgather_output_of_the_wrong_length_names_both_lengths() {
        let input = [1.0f32; 2];
        let mut out = [0.0f32; 3];
        let err = allgather(
            0,
            2,
            &Tensor::from_slice("x", &input),
            &TensorMut::from_slice("x", &mut out),
            &[2, 2],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "rank 0: invalid allgather of tensor 'x': output holds 3 elements but the counts need 4"
        );
    }

    #[test]
    fn alltoall_counts_a_rank_sends_itself_must_match() {
        let input = [1u8; 3];
        let mut out = [0u8; 3];
        let err = alltoall(
            1,
            2,
            &Tensor::from_slice("a2a", &input),
            &[1, 2],
            &TensorMut::from_slice("a2a", &mut out),
            &[2, 1],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "rank 1: invalid alltoall of tensor 'a2a': this rank sends itself 2 elements but expects 1 from itself"
        );
    }

    #[test]
    fn members_out_of_range_or_repeated_are_refused() {
        assert_eq!(
            members(0, 4, &[0, 4]).unwrap_err().to_string(),
            "rank 0: invalid split of tensor 'process set': rank 4 does not exist in a group of 4"
        );
        assert_eq!(
            members(0, 4, &[1, 1]).unwrap_err().to_string(),
            "rank 0: invalid split of tensor 'process set': rank 1 is listed twice"
        );
    }
}
