//! Behaviour of the whole tuner on synthetic throughput functions.

use std::time::Duration;

use super::{Params, Tuner, TunerConfig};
use hvd_core::rng::SplitMix64;

const MIB: f64 = (1 << 20) as f64;
/// Bytes allreduced per simulated step.
const STEP_BYTES: u64 = 64 << 20;

fn log2_ratio(fusion: usize, cycle: Duration, fusion_opt: f64, cycle_opt_ms: f64) -> (f64, f64) {
    (
        (fusion as f64 / fusion_opt).log2(),
        (cycle.as_secs_f64() * 1e3 / cycle_opt_ms).log2(),
    )
}

/// A smooth bump over a floor, its peak (1 GB/s) at `fusion_opt` and `cycle_opt_ms`.
fn bump(p: Params, fusion_opt: f64, cycle_opt_ms: f64) -> f64 {
    let (t, c) = log2_ratio(p.fusion_threshold, p.cycle_time, fusion_opt, cycle_opt_ms);
    1e9 * (0.3 + 0.7 * (-(t * t) / (2.0 * 1.5 * 1.5) - (c * c) / 2.0).exp())
}

fn bump_32mib_3ms(p: Params) -> f64 {
    bump(p, 32.0 * MIB, 3.0)
}

fn bump_8mib_1_5ms(p: Params) -> f64 {
    bump(p, 8.0 * MIB, 1.5)
}

/// Bigger buffers and shorter cycles always help, with diminishing returns: the best
/// point is the corner (256 MiB, 0.5 ms).
fn corner(p: Params) -> f64 {
    let fusion = p.fusion_threshold as f64;
    let cycle_ms = p.cycle_time.as_secs_f64() * 1e3;
    1e9 / ((1.0 + 16.0 * MIB / fusion) * (1.0 + cycle_ms))
}

/// Best true score on a fine grid of the search space.
fn grid_best(f: fn(Params) -> f64) -> f64 {
    let side = 201;
    let mut best = f64::NEG_INFINITY;
    for i in 0..side {
        for j in 0..side {
            let unit = [i as f64 / (side - 1) as f64, j as f64 / (side - 1) as f64];
            best = best.max(f(Params::from_unit(unit)));
        }
    }
    best
}

fn start() -> Params {
    Params {
        fusion_threshold: 128 << 20,
        cycle_time: Duration::from_millis(1),
    }
}

/// Drives a tuner to the end, each step taking `STEP_BYTES / f(current)` seconds times
/// a noise factor uniform in `[1 - noise, 1 + noise]`.
fn tune(f: impl Fn(Params) -> f64, noise: f64) -> Tuner {
    let mut tuner = Tuner::new(TunerConfig::new(start())).expect("valid config");
    let mut rng = SplitMix64::new(42);
    for _ in 0..10_000 {
        if tuner.is_done() {
            return tuner;
        }
        let factor = 1.0 + noise * (2.0 * rng.next_f64() - 1.0);
        let seconds = STEP_BYTES as f64 / f(tuner.current()) * factor;
        tuner.record(STEP_BYTES, Duration::from_secs_f64(seconds));
    }
    panic!("tuner did not finish in 10000 steps");
}

fn assert_converges(name: &str, f: fn(Params) -> f64, noise: f64) {
    let tuner = tune(f, noise);
    let best = tuner.best();
    let (found, grid) = (f(best), grid_best(f));
    let evaluations = tuner.csv_rows().len();
    println!(
        "{name}: found {found:.4e} at {best:?} vs grid best {grid:.4e} ({:.1}%), {evaluations} evaluations",
        100.0 * found / grid
    );
    assert!(found >= 0.9 * grid, "{name}: {found} < 90% of {grid}");
    assert!(evaluations <= TunerConfig::new(start()).max_points);
    assert_eq!(tuner.current(), best);
}

#[test]
fn converges_on_a_smooth_bump() {
    assert_converges("bump 32 MiB, 3 ms", bump_32mib_3ms, 0.0);
}

#[test]
fn converges_despite_multiplicative_noise() {
    assert_converges("bump 8 MiB, 1.5 ms, ±20% noise", bump_8mib_1_5ms, 0.2);
}

#[test]
fn converges_on_an_optimum_in_a_corner() {
    assert_converges("corner 256 MiB, 0.5 ms", corner, 0.0);
}

#[test]
fn converges_on_bumps_anywhere_in_the_space() {
    let mut rng = SplitMix64::new(7);
    for _ in 0..16 {
        let fusion_opt = MIB * 2f64.powf(8.0 * rng.next_f64());
        let cycle_opt_ms = 0.5 * 50f64.powf(rng.next_f64());
        let f = |p| bump(p, fusion_opt, cycle_opt_ms);
        let tuner = tune(f, 0.0);
        let found = f(tuner.best());
        // The bump's peak is 1e9 and lies inside the space.
        assert!(
            found >= 0.9e9,
            "optimum {:.1} MiB, {cycle_opt_ms:.2} ms: found {found:.3e} at {:?}",
            fusion_opt / MIB,
            tuner.best()
        );
    }
}

#[test]
fn same_measurements_give_the_same_run() {
    assert_eq!(
        tune(bump_8mib_1_5ms, 0.2).csv_rows(),
        tune(bump_8mib_1_5ms, 0.2).csv_rows()
    );
}

#[test]
fn csv_log_has_a_row_per_point_and_one_best() {
    let tuner = tune(bump_32mib_3ms, 0.1);
    let columns = Tuner::csv_header().split(',').count();
    let rows = tuner.csv_rows();
    assert!(rows.len() >= TunerConfig::new(start()).initial_points);
    let mut best_rows = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields.len(), columns, "{row}");
        assert_eq!(fields[0], (i + 1).to_string());
        if fields[4] == "1" {
            best_rows.push(fields);
        }
    }
    assert_eq!(best_rows.len(), 1, "{rows:#?}");
    let best = tuner.best();
    assert_eq!(best_rows[0][1], best.fusion_threshold.to_string());
    assert_eq!(
        best_rows[0][2],
        format!("{:.3}", best.cycle_time.as_secs_f64() * 1e3)
    );
    // The start (128 MiB, 1 ms) is the first point measured.
    assert!(rows[0].starts_with("1,134217728,1.000,"), "{}", rows[0]);
}

#[test]
fn record_discards_warmup_and_moves_after_the_samples_of_a_point() {
    let config = TunerConfig::new(start());
    let mut tuner = Tuner::new(config.clone()).expect("valid config");
    let step = Duration::from_millis(10);
    for _ in 0..config.warmup_samples + config.samples_per_point - 1 {
        assert_eq!(tuner.record(STEP_BYTES, step), None);
    }
    let next = tuner
        .record(STEP_BYTES, step)
        .expect("moves to the second point");
    assert_eq!(tuner.current(), next);
    assert_ne!(next, start());
    assert_eq!(tuner.csv_rows().len(), 1);
    assert!(
        tuner.csv_rows()[0].ends_with(",6710886400,1"),
        "{:?}",
        tuner.csv_rows()
    );
}

#[test]
fn invalid_measurements_are_ignored() {
    let mut tuner = Tuner::new(TunerConfig::new(start())).expect("valid config");
    for _ in 0..100 {
        assert_eq!(tuner.record(0, Duration::from_millis(5)), None);
        assert_eq!(tuner.record(STEP_BYTES, Duration::ZERO), None);
    }
    assert!(tuner.csv_rows().is_empty());
    assert_eq!(tuner.best(), start());
    assert!(!tuner.is_done());
}

#[test]
fn a_constant_throughput_ends_at_a_valid_point() {
    let tuner = tune(|_| 1e9, 0.0);
    assert!(tuner.is_done());
    assert_eq!(tuner.best(), start());
}

#[test]
fn invalid_settings_are_named() {
    let mut config = TunerConfig::new(start());
    config.samples_per_point = 0;
    assert_eq!(
        Tuner::new(config).expect_err("0 samples").to_string(),
        "invalid value \"0\" for autotune samples_per_point: expected at least 1"
    );
    let mut config = TunerConfig::new(start());
    config.initial_points = 30;
    assert_eq!(
        Tuner::new(config)
            .expect_err("too many initial points")
            .to_string(),
        "invalid value \"30\" for autotune initial_points: expected between 1 and max_points (20)"
    );
    let mut config = TunerConfig::new(start());
    config.xi = f64::NAN;
    assert_eq!(
        Tuner::new(config).expect_err("NaN xi").to_string(),
        "invalid value \"NaN\" for autotune xi: expected a finite number >= 0"
    );
}
