//! Autotuning (`HVD_AUTOTUNE=1`): finds the fusion threshold and cycle time that give
//! the highest allreduce throughput during the first steps of training, by Bayesian
//! optimisation, as Horovod's autotuner does.
//!
//! # What is tuned, and over what
//! - Fusion threshold: 1 MiB to 256 MiB, on a log2 scale. Fusion off (0) is not a
//!   candidate: a log axis cannot reach it, and a 1 MiB buffer already fuses the small
//!   tensors while larger ones travel alone, as without fusion. A configured 0 is
//!   clamped to 1 MiB ([`Params::clamped`]).
//! - Cycle time: 0.5 ms to 25 ms, on a log scale.
//!
//! Both act by ratios, so the optimiser works in the unit square of their logarithms.
//! The score of a point is its throughput in bytes allreduced per second, and the model
//! sees its natural log: parameters and noise change throughput by factors, which the
//! log turns into even steps, and expected improvement then reads as a fraction.
//!
//! # The model
//! A Gaussian process with a squared-exponential (RBF) kernel
//! `k(a, b) = exp(-|a - b|² / 2ℓ²)` over the unit square. Scores are normalised to zero
//! mean and unit variance, so the signal variance is 1. The length scale ℓ
//! (0.1 to 1.0) and the noise variance (1e-4 to 1, relative to the scores' variance)
//! are chosen from a small grid by maximum marginal likelihood after every point:
//! cheap at this size, deterministic, and it learns both how smooth the throughput is
//! and how noisy the measurements are. Jitter on the diagonal, grown as needed, keeps
//! the Cholesky factorisation working when points repeat.
//!
//! # Choosing the next point, and the best one
//! The best point is the evaluated point with the highest posterior mean: with clean
//! measurements that is the highest score, and with noisy ones it does not crown a
//! lucky measurement. The next point maximises the expected improvement (EI) over that
//! best belief, counting only gains above `xi` (1%), over a 33 × 33 grid that includes
//! the edges and corners plus 256 random points from a seeded SplitMix64, so a run is
//! reproducible.
//!
//! # Sampling and stopping
//! 1. The first `warmup_samples` (3) measurements are discarded: start-up steps are slow
//!    for reasons that have nothing to do with the parameters.
//! 2. Each point is measured `samples_per_point` (5) times and scored by the median, so
//!    one slow step does not mislead the model; after every change of parameters,
//!    `settle_samples` (1) measurement is discarded, as that step ran under both.
//! 3. The first point is the configured start; the next ones (up to `initial_points`,
//!    5 in all) follow a Halton sequence that spreads them over the space.
//! 4. Then every point is the EI maximiser, until the best EI falls below
//!    `min_improvement` (1% of the best score: nothing worth the steps is left to find)
//!    or `max_points` (20) have been evaluated. The EI rule applies from `min_points`
//!    (10) on: after a handful of points that all missed a peak, the model is confident
//!    of a flat landscape it has barely seen. The tuner then settles on the best point
//!    for the rest of training.
//!
//! # What the runtime does
//! Only rank 0 runs a [`Tuner`]: every rank measures different times, and the fusion
//! threshold must be the same everywhere for fused batches to match. After each step
//! rank 0 calls [`Tuner::record`] with the bytes allreduced and the step's wall time;
//! when that returns new [`Params`], rank 0 broadcasts them and every rank applies them
//! from the same cycle on. Once [`Tuner::is_done`], rank 0 writes
//! [`Tuner::csv_header`] and [`Tuner::csv_rows`] to `HVD_AUTOTUNE_LOG` if it is set.

mod acquisition;
mod cholesky;
mod gp;
mod sampling;
mod space;
mod tuner;

#[cfg(test)]
mod tests;

pub use space::Params;
pub use tuner::{Tuner, TunerConfig};
