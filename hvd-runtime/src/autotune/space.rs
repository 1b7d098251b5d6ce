//! The search space: the fusion threshold and the cycle time, each on a log scale,
//! mapped to the unit square the Gaussian process works in.
//!
//! Both parameters act multiplicatively (doubling the fusion buffer or halving the cycle
//! time has a similar effect wherever you start), so equal steps in the unit square are
//! equal ratios of the real values.

use std::time::Duration;

/// Smallest fusion threshold searched. Fusion off (0) is not searched: a log axis cannot
/// reach 0, and a 1 MiB buffer already packs the small tensors that fusion exists for,
/// while the larger ones go out alone as they would without fusion.
pub(super) const FUSION_THRESHOLD_MIN: usize = 1 << 20;
/// Largest fusion threshold searched.
pub(super) const FUSION_THRESHOLD_MAX: usize = 256 << 20;
/// Shortest cycle time searched.
pub(super) const CYCLE_TIME_MIN: Duration = Duration::from_micros(500);
/// Longest cycle time searched.
pub(super) const CYCLE_TIME_MAX: Duration = Duration::from_millis(25);

/// A point of the unit square: `[fusion threshold, cycle time]`, each in `[0, 1]`, where
/// 0 is the low end of the range and 1 the high end, on a log scale.
pub(super) type Point = [f64; 2];

/// The parameters the tuner sets: what the runtime applies while tuning, and at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Params {
    /// Tensor Fusion buffer size in bytes.
    pub fusion_threshold: usize,
    /// How long the background thread waits between negotiation cycles.
    pub cycle_time: Duration,
}

impl Params {
    /// The nearest parameters inside the search space (a fusion threshold of 0 becomes
    /// 1 MiB, the smallest searched).
    pub fn clamped(self) -> Params {
        Params::from_unit(self.to_unit())
    }

    pub(super) fn to_unit(self) -> Point {
        [
            to_log_unit(
                self.fusion_threshold as f64,
                FUSION_THRESHOLD_MIN as f64,
                FUSION_THRESHOLD_MAX as f64,
            ),
            to_log_unit(
                self.cycle_time.as_secs_f64(),
                CYCLE_TIME_MIN.as_secs_f64(),
                CYCLE_TIME_MAX.as_secs_f64(),
            ),
        ]
    }

    /// Rounds to whole bytes and whole microseconds, so that what the log shows is exactly
    /// what was applied.
    pub(super) fn from_unit(point: Point) -> Params {
        let fusion = from_log_unit(
            point[0],
            FUSION_THRESHOLD_MIN as f64,
            FUSION_THRESHOLD_MAX as f64,
        );
        let cycle = from_log_unit(
            point[1],
            CYCLE_TIME_MIN.as_secs_f64(),
            CYCLE_TIME_MAX.as_secs_f64(),
        );
        Params {
            fusion_threshold: fusion.round() as usize,
            cycle_time: Duration::from_micros((cycle * 1e6).round() as u64),
        }
    }
}

fn to_log_unit(value: f64, low: f64, high: f64) -> f64 {
    let value = value.clamp(low, high);
    (value.ln() - low.ln()) / (high.ln() - low.ln())
}

fn from_log_unit(unit: f64, low: f64, high: f64) -> f64 {
    // `clamp` keeps NaN; 0 stands in for it so that a bad point lands on a valid edge.
    let unit = if unit.is_nan() {
        0.0
    } else {
        unit.clamp(0.0, 1.0)
    };
    (low.ln() + unit * (high.ln() - low.ln())).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_of_the_ranges_map_to_the_edges_of_the_unit_square() {
        let low = Params {
            fusion_threshold: FUSION_THRESHOLD_MIN,
            cycle_time: CYCLE_TIME_MIN,
        };
        let high = Params {
            fusion_threshold: FUSION_THRESHOLD_MAX,
            cycle_time: CYCLE_TIME_MAX,
        };
        assert_eq!(low.to_unit(), [0.0, 0.0]);
        assert_eq!(high.to_unit(), [1.0, 1.0]);
        assert_eq!(Params::from_unit([0.0, 0.0]), low);
        assert_eq!(Params::from_unit([1.0, 1.0]), high);
        // 16 MiB is half-way between 1 MiB and 256 MiB on a log2 axis.
        assert_eq!(Params::from_unit([0.5, 0.0]).fusion_threshold, 16 << 20);
    }

    #[test]
    fn values_outside_the_space_are_clamped() {
        let off = Params {
            fusion_threshold: 0,
            cycle_time: Duration::ZERO,
        };
        assert_eq!(
            off.clamped(),
            Params {
                fusion_threshold: FUSION_THRESHOLD_MIN,
                cycle_time: CYCLE_TIME_MIN,
            }
        );
        let huge = Params {
            fusion_threshold: usize::MAX,
            cycle_time: Duration::from_secs(3600),
        };
        assert_eq!(huge.to_unit(), [1.0, 1.0]);
        assert_eq!(
            Params::from_unit([f64::NAN, 2.0]).cycle_time,
            CYCLE_TIME_MAX
        );
    }
}
