//! The alpha-beta cost of a ring allreduce, and its fit to measured times.
//!
//! A ring allreduce of `S` bytes on `n` ranks takes `2 (n-1)` steps (reduce-scatter, then
//! allgather), each sending `S / n` bytes: `t = 2 (n-1) α + 2 (n-1)/n S β + (n-1)/n S γ`,
//! with α the latency of a step, β the time per byte on the wire and γ the time per byte
//! of the reduction. Both byte terms grow as `(n-1)/n S`, so timings of the ring alone
//! cannot tell β from γ: the fit reports their sum as an effective `β` (`2β + γ` over 2),
//! which is what predictions of the same ring need.

/// Fitted costs of one link speed, in seconds and seconds per byte.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ring {
    pub alpha: f64,
    pub beta: f64,
}

impl Ring {
    /// Seconds for an allreduce of `bytes` on `n` ranks.
    pub fn time(&self, n: usize, bytes: f64) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        let steps = 2.0 * (n as f64 - 1.0);
        steps * self.alpha + steps / n as f64 * bytes * self.beta
    }

    /// The least-squares fit of α and β to `(n, bytes, seconds)` measurements, on
    /// relative errors so that small and large sizes count alike. None with fewer than
    /// two independent points.
    pub fn fit(points: &[(usize, f64, f64)]) -> Option<Ring> {
        // Rows (x1, x2) = (2(n-1), 2(n-1)/n S) / t, target 1: solve the 2x2 normal
        // equations.
        let (mut a11, mut a12, mut a22, mut b1, mut b2) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(n, bytes, t) in points.iter().filter(|p| p.0 > 1 && p.2 > 0.0) {
            let steps = 2.0 * (n as f64 - 1.0);
            let (x1, x2) = (steps / t, steps / n as f64 * bytes / t);
            a11 += x1 * x1;
            a12 += x1 * x2;
            a22 += x2 * x2;
            b1 += x1;
            b2 += x2;
        }
        let det = a11 * a22 - a12 * a12;
        if det.abs() <= f64::EPSILON * a11 * a22 {
            return None;
        }
        let alpha = (b1 * a22 - b2 * a12) / det;
        let beta = (a11 * b2 - a12 * b1) / det;
        (alpha.is_finite() && beta.is_finite()).then_some(Ring {
            alpha: alpha.max(0.0),
            beta: beta.max(0.0),
        })
    }
}

/// Seconds per byte of a link of `bits_per_second`.
pub fn wire_beta(bits_per_second: f64) -> f64 {
    8.0 / bits_per_second
}

/// A `tc`-style rate (`1gbit`, `2500mbit`, `25gbit`) in bits per second.
pub fn parse_rate(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let scale = match &lower[digits.len()..] {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => return None,
    };
    digits.parse::<f64>().ok().map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_the_costs_that_made_the_times() {
        let truth = Ring {
            alpha: 50e-6,
            beta: 1e-9,
        };
        let points: Vec<(usize, f64, f64)> = [2usize, 4, 8]
            .iter()
            .flat_map(|&n| [64e3, 1e6, 16e6].map(move |s| (n, s, truth.time(n, s))))
            .collect();
        let fit = Ring::fit(&points).expect("a fit");
        assert!((fit.alpha / truth.alpha - 1.0).abs() < 1e-6, "{fit:?}");
        assert!((fit.beta / truth.beta - 1.0).abs() < 1e-6, "{fit:?}");
        assert_eq!(Ring::fit(&points[..1]), None);
    }

    #[test]
    fn rates_parse_as_tc_writes_them() {
        assert_eq!(parse_rate("1gbit"), Some(1e9));
        assert_eq!(parse_rate("2500mbit"), Some(2.5e9));
        assert_eq!(parse_rate("fast"), None);
        assert_eq!(wire_beta(1e9), 8e-9);
        assert_eq!(
            Ring {
                alpha: 1.0,
                beta: 1.0
            }
            .time(1, 1e9),
            0.0
        );
    }
}
