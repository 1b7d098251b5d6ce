//! Where the tuner looks: a deterministic space-filling design for the first points, and
//! the candidate set over which the acquisition function is maximised.

use super::space::Point;
use hvd_core::rng::SplitMix64;

/// Points per side of the regular candidate grid, edges included, so that corners and
/// edges of the space (a common place for the optimum) are always candidates.
const GRID_SIDE: usize = 33;
/// Random candidates added to the grid, so that successive searches are not limited to
/// the same lattice.
const RANDOM_CANDIDATES: usize = 256;

/// The `index`-th point (from 1) of the 2-D Halton sequence (bases 2 and 3): spreads the
/// first few points evenly over the square, unlike random points, which clump.
pub(super) fn halton(index: usize) -> Point {
    [radical_inverse(index, 2), radical_inverse(index, 3)]
}

fn radical_inverse(mut index: usize, base: usize) -> f64 {
    let mut result = 0.0;
    let mut digit_weight = 1.0 / base as f64;
    while index > 0 {
        result += (index % base) as f64 * digit_weight;
        index /= base;
        digit_weight /= base as f64;
    }
    result
}

/// The regular grid plus fresh random points drawn from `rng`.
pub(super) fn candidates(rng: &mut SplitMix64) -> Vec<Point> {
    let step = 1.0 / (GRID_SIDE - 1) as f64;
    let grid = (0..GRID_SIDE)
        .flat_map(|i| (0..GRID_SIDE).map(move |j| [i as f64 * step, j as f64 * step]));
    let random: Vec<Point> = (0..RANDOM_CANDIDATES)
        .map(|_| [rng.next_f64(), rng.next_f64()])
        .collect();
    grid.chain(random).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halton_starts_with_the_known_sequence() {
        assert_eq!(halton(1), [0.5, 1.0 / 3.0]);
        assert_eq!(halton(2), [0.25, 2.0 / 3.0]);
        assert_eq!(halton(3), [0.75, 1.0 / 9.0]);
    }

    #[test]
    fn candidates_cover_the_corners_and_repeat_for_a_seed() {
        let a = candidates(&mut SplitMix64::new(7));
        assert_eq!(a.len(), GRID_SIDE * GRID_SIDE + RANDOM_CANDIDATES);
        for corner in [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]] {
            assert!(a.contains(&corner), "{corner:?}");
        }
        assert!(a.iter().flatten().all(|c| (0.0..=1.0).contains(c)));
        assert_eq!(a, candidates(&mut SplitMix64::new(7)));
        assert_ne!(a, candidates(&mut SplitMix64::new(8)));
    }
}
