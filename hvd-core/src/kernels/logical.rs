//! bool: one byte per element, any nonzero byte is true, results are always 0 or 1.

use crate::ReduceOp;

/// `Sum`, `Max` (and `Average`, refused earlier by validation) are OR; `Min` and
/// `Product` are AND.
#[inline(always)]
pub(super) fn reduce(op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    match op {
        ReduceOp::Sum | ReduceOp::Max | ReduceOp::Average => {
            for (a, s) in acc.iter_mut().zip(src) {
                *a = u8::from((*a != 0) | (*s != 0));
            }
        }
        ReduceOp::Min | ReduceOp::Product => {
            for (a, s) in acc.iter_mut().zip(src) {
                *a = u8::from((*a != 0) & (*s != 0));
            }
        }
    }
}

/// Normalises to 0/1; a factor of zero clears.
#[inline(always)]
pub(super) fn scale(data: &mut [u8], factor: f64) {
    if factor == 0.0 {
        data.fill(0);
    } else {
        for b in data {
            *b = u8::from(*b != 0);
        }
    }
}
