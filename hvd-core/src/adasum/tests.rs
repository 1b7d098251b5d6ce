//! The distributed recursion against the pairwise formula applied directly, over the
//! in-process reference transport.

use super::*;
use crate::reference::LocalGroup;

/// Rank `r`'s contribution: different directions and lengths on every rank.
fn vector(r: usize, len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i * 7 + r * 13) % 11) as f64 - 5.0 + r as f64 * 0.25)
        .collect()
}

/// The formula, term by term: `(1 - a·b / 2|a|²) a + (1 - a·b / 2|b|²) b`.
fn direct(a: &[f64], b: &[f64]) -> Vec<f64> {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let aa: f64 = a.iter().map(|x| x * x).sum();
    let bb: f64 = b.iter().map(|x| x * x).sum();
    a.iter()
        .zip(b)
        .map(|(x, y)| (1.0 - dot / (2.0 * aa)) * x + (1.0 - dot / (2.0 * bb)) * y)
        .collect()
}

/// Adasum over `size` ranks as the recursion defines it: neighbours first, then pairs of
/// pairs (`adasum(adasum(v0, v1), adasum(v2, v3))`).
fn expected(size: usize, len: usize) -> Vec<f64> {
    let mut level: Vec<Vec<f64>> = (0..size).map(|r| vector(r, len)).collect();
    while level.len() > 1 {
        level = level.chunks(2).map(|p| direct(&p[0], &p[1])).collect();
    }
    level.remove(0)
}

fn run(size: usize, lens: &[usize]) -> Vec<Vec<Vec<f64>>> {
    let group = LocalGroup::new(size).build();
    std::thread::scope(|scope| {
        let handles: Vec<_> = group
            .into_iter()
            .enumerate()
            .map(|(r, g)| {
                scope.spawn(move || {
                    let mut data: Vec<Vec<f64>> = lens.iter().map(|&l| vector(r, l)).collect();
                    let names: Vec<String> = (0..lens.len()).map(|i| format!("t{i}")).collect();
                    let mut views: Vec<TensorMut<'_>> = data
                        .iter_mut()
                        .zip(&names)
                        .map(|(d, n)| TensorMut::from_slice(n, d))
                        .collect();
                    allreduce(&g, &mut views).unwrap();
                    drop(views);
                    data
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn every_rank_gets_the_recursive_pairwise_combination() {
    for size in [1, 2, 4, 8] {
        // Lengths that split unevenly, a single element and an empty tensor, in one batch.
        let lens = [13, 1, 0, 64];
        for (rank, tensors) in run(size, &lens).into_iter().enumerate() {
            for (tensor, &len) in tensors.iter().zip(&lens) {
                let want = expected(size, len);
                for (got, want) in tensor.iter().zip(&want) {
                    assert!(
                        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                        "size {size}, rank {rank}, len {len}: got {tensor:?}, want {want:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_group_that_is_not_a_power_of_two_is_refused_by_name() {
    let group = LocalGroup::new(3).build();
    let mut data = vec![1.0f32; 4];
    let err = allreduce(&group[0], &mut [TensorMut::from_slice("grad.w", &mut data)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rank 0: invalid adasum of tensor 'grad.w': Adasum needs a power-of-two number of ranks; this group has 3"
    );
}

#[test]
fn integer_tensors_are_refused_by_name() {
    let group = LocalGroup::new(1).build();
    let mut data = vec![1i64; 4];
    let err = allreduce(&group[0], &mut [TensorMut::from_slice("step", &mut data)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rank 0: invalid adasum of tensor 'step': Adasum combines floating-point tensors (f16, bf16, f32, f64), not i64"
    );
}
