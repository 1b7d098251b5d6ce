//! `hvd-bench data-gap` end to end on a tiny dataset: the jobs run, every rank count and
//! mode gets one JSON line with the documented fields, a loader does not beat synthetic
//! input, the figure is drawn, and options that cannot work are refused before any
//! rank starts.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn data_gap(cache: &Path, extra: &[&str]) -> Output {
    data_gap_of(96, cache, extra)
}

fn data_gap_of(images: usize, cache: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hvd-bench"))
        .args([
            "data-gap",
            "--batch-size",
            "4",
            "--images",
            &images.to_string(),
        ])
        .args(["--steps", "6", "--warmup", "1", "--compute-ms", "20"])
        .arg("--cache")
        .arg(cache)
        .args(extra)
        .output()
        .expect("hvd-bench runs")
}

fn lines(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn every_rank_count_and_mode_gets_a_json_line_and_loaders_trail_synthetic() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("gap.svg");
    let out = data_gap(
        dir.path(),
        &[
            "--np",
            "1,2",
            "--no-torch",
            "--json",
            "--plot",
            plot.to_str().unwrap(),
        ],
    );
    let rows = lines(&out);
    let keys: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| (r["np"].as_u64().unwrap(), r["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        keys,
        [(1, "synthetic"), (1, "hvd"), (2, "synthetic"), (2, "hvd")]
    );
    for row in &rows {
        for field in ["images_per_s", "gap", "data_bound", "demand", "comm_excess"] {
            assert!(row[field].as_f64().is_some(), "{field} in {row}");
        }
        let gap = row["gap"].as_f64().unwrap();
        let bound = row["data_bound"].as_f64().unwrap();
        assert!(
            (0.0..=1.0).contains(&gap) && (0.0..=1.0).contains(&bound),
            "{row}"
        );
        let capacity = &row["capacity"];
        match row["mode"].as_str() {
            Some("synthetic") => assert!(
                capacity.is_null() && gap == 0.0 && row["comm_excess"] == 0.0,
                "{row}"
            ),
            _ => assert!(capacity.as_f64().is_some_and(|c| c > 0.0), "{row}"),
        }
    }
    for pair in rows.chunks(2) {
        let (synthetic, hvd) = (&pair[0], &pair[1]);
        let rate = |r: &Value| r["images_per_s"].as_f64().unwrap();
        // Within reason: a short run's noise, never a loader well ahead of no loader.
        assert!(rate(hvd) <= rate(synthetic) * 1.15, "{synthetic} {hvd}");
        // Synthetic input runs as fast as the job asks: its throughput is the demand.
        let demand = synthetic["demand"].as_f64().unwrap();
        assert!((rate(synthetic) - demand).abs() <= 0.2, "{synthetic}");
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("hvd&apos;s loader"),
        "{svg}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("PyTorch's DataLoader: left out"),
        "{stderr}"
    );
}

#[test]
#[cfg_attr(
    not(hvd_have_torch),
    ignore = "needs a Python with torch, torchvision and Pillow (pip install torch torchvision pillow, or HVD_BENCH_PYTHON=/path/to/python)"
)]
fn pytorch_dataloader_is_measured_when_a_python_with_torch_is_at_hand() {
    // The benchmark finds the Python itself (HVD_BENCH_PYTHON, the project's virtual
    // environment, python3), as the build script did.
    let dir = tempfile::tempdir().unwrap();
    let out = data_gap(dir.path(), &["--np", "1", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let rows = lines(&out);
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["synthetic", "torch", "hvd"], "{stderr}");
    assert!(
        rows[1]["capacity"].as_f64().is_some_and(|c| c > 0.0),
        "{}",
        rows[1]
    );
}

#[test]
fn a_python_without_torch_is_skipped_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-python");
    let out = data_gap(
        dir.path(),
        &["--np", "1", "--json", "--python", missing.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let rows = lines(&out);
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["synthetic", "hvd"]);
    let why = format!(
        "# PyTorch's DataLoader: skipped: {} cannot run: No such file or directory (os error 2)",
        missing.display()
    );
    assert!(stderr.lines().any(|l| l == why), "{stderr}");
}

#[test]
fn options_that_cannot_work_are_refused_before_any_rank_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out = data_gap_of(20, dir.path(), &["--np", "4", "--no-torch"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--images 20 is too few: 4 ranks × batch 4 × 10 steps"),
        "{stderr}"
    );
    let out = data_gap(dir.path(), &["--np", "1", "--gradient", "lots"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gradient"));
    // Nothing was generated for a refused run.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
