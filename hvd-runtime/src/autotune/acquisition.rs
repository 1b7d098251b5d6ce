//! Expected improvement: how much better than the best score so far a point is expected
//! to be, averaged over the Gaussian process's uncertainty there. It is high where the
//! predicted mean is high (exploitation) and where the uncertainty is large
//! (exploration), and it falls to zero where the process is sure the point is worse.

use super::gp::{GaussianProcess, Prediction};
use super::space::Point;

/// Expected improvement of `prediction` over `incumbent`, counting only gains above
/// `xi` (a margin that favours exploring over polishing a known point).
pub(super) fn expected_improvement(prediction: Prediction, incumbent: f64, xi: f64) -> f64 {
    let gain = prediction.mean - incumbent - xi;
    let sigma = prediction.variance.max(0.0).sqrt();
    if sigma < 1e-12 {
        return gain.max(0.0);
    }
    let z = gain / sigma;
    (gain * normal_cdf(z) + sigma * normal_pdf(z)).max(0.0)
}

/// The candidate with the highest expected improvement, and that improvement. The first
/// of equal candidates wins, so the choice is reproducible.
pub(super) fn maximise(
    gp: &GaussianProcess,
    candidates: &[Point],
    incumbent: f64,
    xi: f64,
) -> Option<(Point, f64)> {
    let mut best: Option<(Point, f64)> = None;
    for &point in candidates {
        let ei = expected_improvement(gp.predict(point), incumbent, xi);
        if ei.is_finite() && best.is_none_or(|(_, b)| ei > b) {
            best = Some((point, ei));
        }
    }
    best
}

fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Complementary error function, Chebyshev fit from Numerical Recipes (`erfcc`):
/// relative error below 1.2e-7 everywhere, tails included, which is where EI lives
/// once the search has converged.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::super::gp::Hyperparameters;
    use super::*;

    #[test]
    fn normal_cdf_matches_known_values() {
        for (z, want) in [
            (0.0, 0.5),
            (1.0, 0.841_344_746),
            (-1.96, 0.024_997_895),
            (3.0, 0.998_650_102),
            (-5.0, 2.866_515_7e-7),
        ] {
            let got = normal_cdf(z);
            assert!(
                (got - want).abs() <= 2e-7 * want,
                "Φ({z}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn certain_predictions_improve_by_their_gain_only() {
        let sure = |mean| Prediction {
            mean,
            variance: 0.0,
        };
        assert_eq!(expected_improvement(sure(3.0), 1.0, 0.5), 1.5);
        assert_eq!(expected_improvement(sure(1.0), 3.0, 0.0), 0.0);
        // Uncertainty adds value even when the mean is no better.
        let unsure = Prediction {
            mean: 1.0,
            variance: 1.0,
        };
        assert!((expected_improvement(unsure, 1.0, 0.0) - normal_pdf(0.0)).abs() < 1e-12);
    }

    #[test]
    fn unexplored_points_beat_well_observed_poor_ones() {
        // A poor region measured three times near (0.1, 0.1), a good point at the centre.
        let observations = [
            ([0.1, 0.1], 1.0),
            ([0.12, 0.1], 1.1),
            ([0.1, 0.12], 0.9),
            ([0.5, 0.5], 3.0),
        ];
        let hyper = Hyperparameters {
            length_scale: 0.2,
            noise_variance: 1e-4,
        };
        let gp = GaussianProcess::fit(&observations, hyper).expect("fit");
        let poor = expected_improvement(gp.predict([0.1, 0.1]), 3.0, 0.0);
        let unexplored = expected_improvement(gp.predict([0.9, 0.9]), 3.0, 0.0);
        assert!(
            unexplored > 100.0 * poor,
            "unexplored {unexplored} vs poor {poor}"
        );

        let (point, ei) =
            maximise(&gp, &[[0.1, 0.1], [0.9, 0.9], [0.11, 0.11]], 3.0, 0.0).expect("candidates");
        assert_eq!((point, ei), ([0.9, 0.9], unexplored));
    }
}
