//! The reference transport's failure paths: a departed rank, a rank that never arrives,
//! and ranks that disagree about the call.

use std::time::Duration;

use hvd_core::reference::LocalGroup;
use hvd_core::{Collective, ReduceOp, Reduction, TensorMut};

fn sum(group: &dyn Collective, name: &str, value: f32) -> hvd_core::Result<f32> {
    let mut v = [value];
    group.allreduce(
        &mut [TensorMut::from_slice(name, &mut v)],
        Reduction::new(ReduceOp::Sum),
    )?;
    Ok(v[0])
}

#[test]
fn a_dropped_rank_fails_the_waiting_ranks_naming_it() {
    let mut group = LocalGroup::new(3).build();
    drop(group.remove(2));
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = group
            .iter()
            .map(|g| s.spawn(move || sum(g, "grad.w1", 1.0).unwrap_err().to_string()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        errors,
        [
            "rank 0: lost rank 2 during allreduce of tensor 'grad.w1': its collective was dropped",
            "rank 1: lost rank 2 during allreduce of tensor 'grad.w1': its collective was dropped",
        ]
    );
}

#[test]
fn a_rank_that_never_calls_times_out_naming_the_missing_ranks() {
    let group = LocalGroup::new(3)
        .timeout(Duration::from_millis(50))
        .build();
    let err = sum(&group[0], "loss", 1.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rank 0: allreduce of tensor 'loss' timed out after 50ms waiting for rank(s) 1, 2"
    );
}

#[test]
fn ranks_calling_different_operations_all_get_the_mismatch() {
    let group = LocalGroup::new(2).build();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| sum(&group[0], "x", 1.0).unwrap_err().to_string());
        let b = s.spawn(|| group[1].barrier().unwrap_err().to_string());
        (a.join().unwrap(), b.join().unwrap())
    });
    let expected_tail =
        "rank 0 has allreduce sum prescale 1 postscale 1 [f32 x 1], rank 1 has barrier ";
    assert_eq!(
        a,
        format!("Mismatched calls for tensor 'x': {expected_tail}")
    );
    assert_eq!(
        b,
        format!("Mismatched calls for tensor 'barrier': {expected_tail}")
    );
}
