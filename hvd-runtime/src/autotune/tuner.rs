//! The tuner: a state machine that the runtime feeds one measurement per training step,
//! and that answers with the parameters to use next.

use std::time::Duration;

use hvd_core::{Error, Result};

use super::acquisition::maximise;
use super::gp::GaussianProcess;
use super::sampling::{candidates, halton};
use super::space::{Params, Point};
use hvd_core::rng::SplitMix64;

/// How the tuner samples, and when it stops. [`TunerConfig::new`] gives the defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct TunerConfig {
    /// The parameters configured before tuning; measured first (after clamping into the
    /// search space), so that tuning never ends on something worse than the start.
    pub start: Params,
    /// Measurements discarded before the first point: the first steps of training pay
    /// for allocation, connection set-up and an empty response cache.
    pub warmup_samples: usize,
    /// Measurements discarded after each change of parameters: the step in flight when
    /// the change arrives ran partly under the old ones.
    pub settle_samples: usize,
    /// Measurements per point; the point's score is their median, which one slow step
    /// (a checkpoint, a straggler) cannot move.
    pub samples_per_point: usize,
    /// Points evaluated before the Gaussian process takes over (the start, then a
    /// space-filling design); the process needs a spread of points to learn from.
    pub initial_points: usize,
    /// Points evaluated before the stopping rule applies: until then the tuner keeps
    /// exploring even where the model expects little, as a few points can miss a peak.
    pub min_points: usize,
    /// Points evaluated at most; the tuner then settles on the best one.
    pub max_points: usize,
    /// Gains below this (a fraction, as scores are compared in log space) do not count
    /// as improvement in the acquisition function, which favours exploration.
    pub xi: f64,
    /// The tuner stops once the best candidate's expected improvement (a fraction of the
    /// best score) falls below this.
    pub min_improvement: f64,
    /// Seeds the random candidates; the same seed and measurements give the same run.
    pub seed: u64,
}

impl TunerConfig {
    /// Defaults after Horovod's (3 warm-up samples, at most 20 points), starting at
    /// `start`.
    pub fn new(start: Params) -> TunerConfig {
        TunerConfig {
            start,
            warmup_samples: 3,
            settle_samples: 1,
            samples_per_point: 5,
            initial_points: 5,
            min_points: 10,
            max_points: 20,
            xi: 0.01,
            min_improvement: 0.01,
            seed: 0x6876_645f_6175_746f,
        }
    }

    fn validate(&self) -> Result<()> {
        let invalid = |name: &str, value: String, expected: &str| Error::Config {
            name: format!("autotune {name}"),
            value,
            expected: expected.into(),
        };
        if self.samples_per_point == 0 {
            return Err(invalid("samples_per_point", "0".into(), "at least 1"));
        }
        if self.initial_points == 0 || self.initial_points > self.max_points {
            return Err(invalid(
                "initial_points",
                self.initial_points.to_string(),
                &format!("between 1 and max_points ({})", self.max_points),
            ));
        }
        for (name, value) in [("xi", self.xi), ("min_improvement", self.min_improvement)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(invalid(name, value.to_string(), "a finite number >= 0"));
            }
        }
        Ok(())
    }
}

/// One evaluated point.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Evaluation {
    params: Params,
    /// Median throughput, bytes per second.
    score: f64,
}

/// Bayesian optimisation of [`Params`] for throughput (bytes allreduced per second).
#[derive(Clone, Debug)]
pub struct Tuner {
    config: TunerConfig,
    current: Params,
    evaluations: Vec<Evaluation>,
    /// Throughputs measured at `current` so far.
    samples: Vec<f64>,
    /// Measurements still to discard before sampling `current`.
    discard: usize,
    /// Index of the best evaluation.
    best: Option<usize>,
    rng: SplitMix64,
    done: bool,
}

impl Tuner {
    /// A tuner at the start of its search; an error names an invalid setting.
    pub fn new(config: TunerConfig) -> Result<Tuner> {
        config.validate()?;
        Ok(Tuner {
            current: config.start.clamped(),
            evaluations: Vec::new(),
            samples: Vec::with_capacity(config.samples_per_point),
            discard: config.warmup_samples,
            best: None,
            rng: SplitMix64::new(config.seed),
            done: false,
            config,
        })
    }

    /// The parameters to use now.
    pub fn current(&self) -> Params {
        self.current
    }

    /// Feeds one step's measurement: `bytes` allreduced in `elapsed`. Returns the new
    /// parameters when they change (a new point, or the best point once tuning is done).
    /// Steps that moved no bytes or took no time say nothing about throughput and are
    /// ignored, as is everything after tuning is done.
    pub fn record(&mut self, bytes: u64, elapsed: Duration) -> Option<Params> {
        let seconds = elapsed.as_secs_f64();
        if self.done || bytes == 0 || seconds <= 0.0 {
            return None;
        }
        if self.discard > 0 {
            self.discard -= 1;
            return None;
        }
        self.samples.push(bytes as f64 / seconds);
        if self.samples.len() < self.config.samples_per_point {
            return None;
        }
        let score = hvd_core::summary::median(&self.samples).unwrap_or(0.0);
        self.samples.clear();
        self.evaluations.push(Evaluation {
            params: self.current,
            score,
        });
        let next = match self.update() {
            Some(point) => Params::from_unit(point),
            None => {
                self.done = true;
                self.best()
            }
        };
        if next == self.current {
            return None;
        }
        self.current = next;
        self.discard = self.config.settle_samples;
        Some(next)
    }

    /// Whether tuning has finished; [`Tuner::current`] is then the best point for good.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The best point evaluated so far (the start before any was).
    pub fn best(&self) -> Params {
        self.best
            .map_or(self.current, |i| self.evaluations[i].params)
    }

    /// Header of the CSV log written to `HVD_AUTOTUNE_LOG`.
    pub fn csv_header() -> &'static str {
        "sample,fusion_threshold_bytes,cycle_time_ms,score_bytes_per_sec,best"
    }

    /// One CSV row per evaluated point, in order; `best` is 1 on the row of
    /// [`Tuner::best`] only. Under heavy noise that need not be the highest score: the
    /// best point is the one the model, which averages out noise, rates highest.
    pub fn csv_rows(&self) -> Vec<String> {
        self.evaluations
            .iter()
            .enumerate()
            .map(|(i, e)| {
                format!(
                    "{},{},{:.3},{:.0},{}",
                    i + 1,
                    e.params.fusion_threshold,
                    e.params.cycle_time.as_secs_f64() * 1e3,
                    e.score,
                    u8::from(self.best == Some(i)),
                )
            })
            .collect()
    }

    /// Refits the model to every evaluation, chooses the best point, and returns the
    /// next point to evaluate, or `None` when tuning should stop.
    fn update(&mut self) -> Option<Point> {
        // Log throughput: parameters change throughput by factors, and measurement noise
        // is proportional too; in log space both are even, and EI reads as a fraction.
        let observations: Vec<(Point, f64)> = self
            .evaluations
            .iter()
            .map(|e| (e.params.to_unit(), e.score.ln()))
            .collect();
        // Scores are finite and positive by construction, so the fit cannot fail on
        // them; should it fail anyway, stopping at the best measurement is safe.
        let Ok(gp) = GaussianProcess::fit_best(&observations) else {
            self.best = first_max(observations.iter().map(|(_, v)| *v));
            return None;
        };
        // The best point is the one the model believes best, not the best measurement:
        // a lucky measurement would otherwise win, and make real improvements elsewhere
        // look unlikely.
        let believed: Vec<f64> = observations
            .iter()
            .map(|(p, _)| gp.predict(*p).mean)
            .collect();
        self.best = first_max(believed.iter().copied());
        let n = self.evaluations.len();
        if n >= self.config.max_points {
            return None;
        }
        if n < self.config.initial_points {
            return Some(halton(n));
        }
        let incumbent = believed[self.best?];
        let (point, ei) = maximise(&gp, &candidates(&mut self.rng), incumbent, self.config.xi)?;
        (n < self.config.min_points || ei >= self.config.min_improvement).then_some(point)
    }
}

/// Index of the largest value; the earliest wins ties.
fn first_max(values: impl Iterator<Item = f64>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in values.enumerate() {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}
