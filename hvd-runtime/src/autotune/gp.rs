//! Gaussian-process regression over the unit square: a prior belief that the score is a
//! smooth function of the parameters, updated by the measured points into a mean and an
//! uncertainty at every other point.

use hvd_core::{Error, Result};

use super::cholesky::Cholesky;
use super::space::Point;

/// The kernel's free settings, in units of the normalised scores (unit variance).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Hyperparameters {
    /// Distance in the unit square over which the score stays correlated.
    pub length_scale: f64,
    /// Variance of measurement noise, relative to the variance of the scores.
    pub noise_variance: f64,
}

/// Length scales the fit chooses from: from "a fifth of a range changes everything" to
/// "the whole space is one slope".
const LENGTH_SCALES: [f64; 5] = [0.1, 0.2, 0.35, 0.6, 1.0];
/// Noise levels the fit chooses from: from clean measurements to scores that differ by
/// noise alone, so that noise is not mistaken for structure worth exploiting.
const NOISE_VARIANCES: [f64; 4] = [1e-4, 1e-2, 0.1, 1.0];

/// Added to the diagonal, growing until the factorisation succeeds: identical points
/// make the kernel matrix singular when the noise is tiny.
const JITTERS: [f64; 6] = [1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1.0];

/// Posterior belief about the score at one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Prediction {
    pub mean: f64,
    /// Variance of the underlying function (measurement noise excluded).
    pub variance: f64,
}

/// A Gaussian process with a squared-exponential (RBF) kernel
/// `k(a, b) = exp(-|a - b|² / 2ℓ²)`, fitted to observations whose values are normalised
/// to zero mean and unit variance, so the signal variance is 1.
#[derive(Clone, Debug)]
pub(super) struct GaussianProcess {
    points: Vec<Point>,
    hyper: Hyperparameters,
    chol: Cholesky,
    /// `(K + σ²I)⁻¹ y` for the normalised values `y`.
    alpha: Vec<f64>,
    mean: f64,
    scale: f64,
    log_likelihood: f64,
}

impl GaussianProcess {
    /// Fits every hyperparameter pair of a small grid and keeps the one under which the
    /// observations are most likely (maximum marginal likelihood): a grid instead of a
    /// gradient search keeps the choice deterministic and cannot diverge.
    pub(super) fn fit_best(observations: &[(Point, f64)]) -> Result<GaussianProcess> {
        let mut best: Option<GaussianProcess> = None;
        for length_scale in LENGTH_SCALES {
            for noise_variance in NOISE_VARIANCES {
                let hyper = Hyperparameters {
                    length_scale,
                    noise_variance,
                };
                let gp = GaussianProcess::fit(observations, hyper)?;
                if best
                    .as_ref()
                    .is_none_or(|b| gp.log_likelihood > b.log_likelihood)
                {
                    best = Some(gp);
                }
            }
        }
        best.ok_or_else(|| numerical_failure(observations.len()))
    }

    /// Fits the observations `(point, value)` under fixed hyperparameters. Non-finite
    /// values or coordinates are an error; with no observations this is the prior.
    pub(super) fn fit(
        observations: &[(Point, f64)],
        hyper: Hyperparameters,
    ) -> Result<GaussianProcess> {
        for (point, value) in observations {
            if !value.is_finite() || !point.iter().all(|c| c.is_finite()) {
                return Err(Error::Config {
                    name: "autotune observation".into(),
                    value: format!("{value} at {point:?}"),
                    expected: "a finite score at a finite point".into(),
                });
            }
        }
        let n = observations.len();
        let points: Vec<Point> = observations.iter().map(|(p, _)| *p).collect();
        let (mean, scale) = mean_and_scale(observations.iter().map(|(_, v)| *v));
        let y: Vec<f64> = observations
            .iter()
            .map(|(_, v)| (v - mean) / scale)
            .collect();

        let mut k = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                k[i * n + j] = kernel(points[i], points[j], hyper.length_scale);
            }
        }
        let chol = JITTERS
            .iter()
            .find_map(|jitter| {
                let mut a = k.clone();
                for i in 0..n {
                    a[i * n + i] += hyper.noise_variance + jitter;
                }
                Cholesky::new(&a, n)
            })
            .ok_or_else(|| numerical_failure(n))?;
        let alpha = chol.solve(&y);
        let fit: f64 = y.iter().zip(&alpha).map(|(y, a)| y * a).sum();
        let log_likelihood =
            -0.5 * fit - chol.half_log_det() - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
        Ok(GaussianProcess {
            points,
            hyper,
            chol,
            alpha,
            mean,
            scale,
            log_likelihood,
        })
    }

    /// Posterior mean and variance at `x`, in the units of the observed values.
    pub(super) fn predict(&self, x: Point) -> Prediction {
        let k: Vec<f64> = self
            .points
            .iter()
            .map(|p| kernel(x, *p, self.hyper.length_scale))
            .collect();
        let mean: f64 = k.iter().zip(&self.alpha).map(|(k, a)| k * a).sum();
        let v = self.chol.solve_lower(&k);
        let explained: f64 = v.iter().map(|v| v * v).sum();
        Prediction {
            mean: self.mean + self.scale * mean,
            variance: self.scale * self.scale * (1.0 - explained).max(0.0),
        }
    }

    #[cfg(test)]
    pub(super) fn hyperparameters(&self) -> Hyperparameters {
        self.hyper
    }
}

fn kernel(a: Point, b: Point, length_scale: f64) -> f64 {
    let d2: f64 = a.iter().zip(&b).map(|(a, b)| (a - b) * (a - b)).sum();
    (-d2 / (2.0 * length_scale * length_scale)).exp()
}

/// Mean and standard deviation of the values. With fewer than two distinct values the
/// spread is unknown; a scale of 1 then leaves the values as they are.
fn mean_and_scale(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = values.clone().count();
    if n == 0 {
        return (0.0, 1.0);
    }
    let mean = values.clone().sum::<f64>() / n as f64;
    let variance = values.map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    let std = variance.sqrt();
    (mean, if std > 1e-12 { std } else { 1.0 })
}

fn numerical_failure(n: usize) -> Error {
    Error::Config {
        name: "autotune Gaussian process".into(),
        value: format!("{n} observations"),
        expected: "a kernel matrix that factorises once jitter is added".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY_NOISE: Hyperparameters = Hyperparameters {
        length_scale: 0.3,
        noise_variance: 1e-8,
    };

    fn observations() -> Vec<(Point, f64)> {
        vec![
            ([0.1, 0.2], 3.0),
            ([0.5, 0.5], 7.0),
            ([0.9, 0.3], 4.0),
            ([0.3, 0.8], 5.0),
        ]
    }

    #[test]
    fn posterior_mean_interpolates_observations_when_noise_is_tiny() {
        let gp = GaussianProcess::fit(&observations(), TINY_NOISE).expect("fit");
        for (point, value) in observations() {
            let p = gp.predict(point);
            assert!((p.mean - value).abs() < 1e-4, "{point:?}: {p:?} vs {value}");
        }
    }

    #[test]
    fn variance_shrinks_at_observed_points() {
        let gp = GaussianProcess::fit(&observations(), TINY_NOISE).expect("fit");
        let far = gp.predict([1.0, 1.0]).variance;
        for (point, _) in observations() {
            let near = gp.predict(point).variance;
            assert!(near < 1e-4 * far, "{point:?}: {near} vs far {far}");
        }
        // Far from every observation the posterior returns to the prior: mean of the
        // data, variance of the data.
        let prior = gp.predict([10.0, 10.0]);
        assert!((prior.mean - 4.75).abs() < 1e-9, "{prior:?}");
        assert!((prior.variance - 2.1875).abs() < 1e-9, "{prior:?}");
    }

    #[test]
    fn identical_points_and_constant_values_still_fit() {
        let same = vec![([0.5, 0.5], 2.0); 6];
        let gp = GaussianProcess::fit(&same, TINY_NOISE).expect("fit despite singular K");
        let p = gp.predict([0.5, 0.5]);
        assert!(
            (p.mean - 2.0).abs() < 1e-9 && p.variance.is_finite(),
            "{p:?}"
        );
        let gp = GaussianProcess::fit(&[], TINY_NOISE).expect("prior");
        assert_eq!(
            gp.predict([0.2, 0.2]),
            Prediction {
                mean: 0.0,
                variance: 1.0
            }
        );
    }

    #[test]
    fn non_finite_values_are_an_error_that_names_them() {
        let mut obs = observations();
        obs[2].1 = f64::NAN;
        let err = GaussianProcess::fit_best(&obs).expect_err("NaN must be rejected");
        assert_eq!(
            err.to_string(),
            "invalid value \"NaN at [0.9, 0.3]\" for autotune observation: \
             expected a finite score at a finite point"
        );
    }

    #[test]
    fn maximum_likelihood_prefers_noise_for_noisy_data() {
        // The same point measured with scattered results can only be explained by noise.
        let obs: Vec<(Point, f64)> = [1.0, 3.0, 2.0, 1.5, 2.5]
            .iter()
            .map(|v| ([0.5, 0.5], *v))
            .collect();
        let gp = GaussianProcess::fit_best(&obs).expect("fit");
        assert!(gp.hyperparameters().noise_variance >= 0.1, "{gp:?}");
        // A smooth trend, measured cleanly, is explained without noise.
        let obs: Vec<(Point, f64)> = (0..8)
            .map(|i| {
                let x = i as f64 / 7.0;
                ([x, 0.5], x * x)
            })
            .collect();
        let gp = GaussianProcess::fit_best(&obs).expect("fit");
        assert_eq!(gp.hyperparameters().noise_variance, 1e-4);
    }
}
