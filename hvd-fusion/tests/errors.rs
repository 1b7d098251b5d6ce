//! A bad call fails through `Fusion` with exactly the error text it gets without it.

use hvd_core::reference::LocalGroup;
use hvd_core::{Collective, DType, ReduceOp, Reduction, TensorMut};
use hvd_fusion::Fusion;

/// The error text of `call` on rank 1 of a plain group and of a fused one (tiny threshold,
/// so that any batch would be packed). Every call here fails before any exchange, so
/// rank 1 can make it alone.
fn plain_and_fused(call: impl Fn(&dyn Collective) -> hvd_core::Result<()>) -> (String, String) {
    let plain = LocalGroup::new(2).build().remove(1);
    let fused = Fusion::new(LocalGroup::new(2).build().remove(1), 8);
    let text = |group: &dyn Collective| match call(group) {
        Ok(()) => "succeeded".to_owned(),
        Err(e) => e.to_string(),
    };
    (text(&plain), text(&fused))
}

#[test]
fn bool_average_in_a_batch_names_the_bool_tensor() {
    let (plain, fused) = plain_and_fused(|group| {
        let (mut w, mut mask, mut b) = (vec![1.0f32; 4], vec![1u8; 4], vec![1.0f32; 2]);
        let mut batch = [
            TensorMut::from_slice("w", &mut w),
            TensorMut::from_bytes("mask", DType::Bool, vec![4], &mut mask)?,
            TensorMut::from_slice("b", &mut b),
        ];
        group.allreduce(&mut batch, Reduction::new(ReduceOp::Average))
    });
    assert_eq!(
        fused,
        "rank 1: invalid allreduce of tensor 'mask': average is not defined for bool; use max (any rank true) or min (every rank true)"
    );
    assert_eq!(fused, plain);
}

#[test]
fn a_non_finite_prescale_is_refused_before_packing() {
    let (plain, fused) = plain_and_fused(|group| {
        let (mut a, mut b) = (vec![1i32; 4], vec![1i32; 2]);
        let mut batch = [
            TensorMut::from_slice("a", &mut a),
            TensorMut::from_slice("b", &mut b),
        ];
        group.allreduce(
            &mut batch,
            Reduction::new(ReduceOp::Sum).with_prescale(f64::NAN),
        )
    });
    assert_eq!(
        fused,
        "rank 1: invalid allreduce of tensor 'a': prescale factor must be finite, got NaN"
    );
    assert_eq!(fused, plain);
}

#[test]
fn a_broadcast_root_out_of_range_reads_as_unfused() {
    let (plain, fused) = plain_and_fused(|group| {
        let (mut a, mut b, mut c) = (vec![1u8; 4], vec![1.0f64; 2], vec![1i16; 3]);
        let mut batch = [
            TensorMut::from_slice("a", &mut a),
            TensorMut::from_slice("b", &mut b),
            TensorMut::from_slice("c", &mut c),
        ];
        group.broadcast(&mut batch, 2)
    });
    assert_eq!(
        fused,
        "rank 1: invalid broadcast of tensor 'a (+2 more)': root rank 2 does not exist in a group of 2"
    );
    assert_eq!(fused, plain);
}
