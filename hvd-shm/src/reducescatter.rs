//! Reducescatter in steps: step `c` carries bytes `c * region ..` of every block, block
//! `r` in region `r` of each sender's slot, and rank `r` reduces the pieces of its block
//! in rank order.

use hvd_core::{DType, Reduction, Result, kernels};

use crate::copy::copy;
use crate::lockstep::{Desc, Lockstep};
use crate::op::{Call, Op};
use hvd_core::schedule::blocks;

use crate::plan;

/// Reduces `input` (blocks of `counts` elements) across the group into `output`, this
/// rank's block.
pub(crate) fn reducescatter(
    steps: &mut Lockstep,
    tensor: &str,
    dtype: DType,
    input: &[u8],
    output: &mut [u8],
    counts: &[usize],
    reduction: Reduction,
) -> Result<()> {
    let call = Call {
        op: Op::Reducescatter,
        tensor,
    };
    let (rank, size, region) = (steps.rank(), steps.size(), steps.region_bytes());
    let blocks = blocks(0, counts, dtype.size());
    let longest = blocks.iter().map(|b| b.len()).max().unwrap_or(0);
    let own = blocks[rank].clone();
    if size == 1 {
        copy(output, &input[own]);
        kernels::prescale(dtype, reduction, output);
        kernels::finish(dtype, reduction, 1, output);
        return Ok(());
    }
    for c in 0..longest.div_ceil(region) {
        let slot = steps.slot_mut();
        for (peer, block) in blocks.iter().enumerate().filter(|(p, _)| *p != rank) {
            let piece = plan::piece(block.len(), region, c);
            let at = peer * region;
            let staged = &mut slot[at..at + piece.len()];
            copy(
                staged,
                &input[block.start + piece.start..block.start + piece.end],
            );
            kernels::prescale(dtype, reduction, staged);
        }
        steps.sync(&call, Desc::new(call.op, input.len()))?;
        let piece = plan::piece(own.len(), region, c);
        let at = rank * region;
        let acc = &mut output[piece.clone()];
        copy(acc, &input[own.start + piece.start..own.start + piece.end]);
        kernels::prescale(dtype, reduction, acc);
        for peer in (0..size).filter(|p| *p != rank) {
            kernels::reduce_into(
                dtype,
                reduction.op,
                acc,
                &steps.slot(peer)[at..at + piece.len()],
            );
        }
        kernels::finish(dtype, reduction, size, acc);
    }
    Ok(())
}
