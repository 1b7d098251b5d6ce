//! `hvd-bench synthetic` end to end: real ranks, real model tensors, a short run with
//! scaled-down compute; the output is checked for structure and sane numbers.

use std::process::{Command, Output};

use serde_json::Value;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hvd-bench"))
        .arg("synthetic")
        .args(args)
        .output()
        .expect("hvd-bench runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A few batches of ResNet-50 at 2 % of the P100 compute time.
const SHORT: [&str; 10] = [
    "--model",
    "resnet50",
    "--compute-scale",
    "0.02",
    "--warmup",
    "1",
    "--batches-per-iter",
    "2",
    "--iters",
    "2",
];

#[test]
fn json_sweep_reports_efficiency_against_the_one_rank_job() {
    let out = bench(&[&SHORT[..], &["--np", "1,2", "--fusion", "on,off", "--json"]].concat());
    let rows: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let key = |r: &Value| (r["np"].as_u64(), r["fusion"].as_str().map(str::to_owned));
    let keys: Vec<_> = rows.iter().map(key).collect();
    let expected: Vec<_> = [(1, "on"), (1, "off"), (2, "on"), (2, "off")]
        .iter()
        .map(|&(np, f)| (Some(np), Some(f.to_owned())))
        .collect();
    assert_eq!(keys, expected);
    for row in &rows {
        let number = |name: &str| row[name].as_f64().unwrap_or(f64::NAN);
        for name in [
            "img_sec_per_rank",
            "total_img_sec",
            "compute_efficiency",
            "scaling_efficiency",
        ] {
            let x = number(name);
            assert!(x.is_finite() && x > 0.0, "{name} = {x} in {row}");
        }
        let np = row["np"].as_u64().unwrap_or(0) as f64;
        let total = number("total_img_sec");
        assert!(
            (total - np * number("img_sec_per_rank")).abs() < 1e-2 * total,
            "{row}"
        );
        assert_eq!(row["model"], "resnet50");
        assert_eq!(row["iters"], 2);
        // 32 images in 2 % of 164 ms: compute alone allows 9750 img/sec per rank.
        assert!(
            (row["compute_ms"].as_f64().unwrap_or(0.0) - 3.282).abs() < 0.01,
            "{row}"
        );
        // Fusion's gain is reported on the fusion-on rows, against the same rank count.
        assert_eq!(
            row["fusion_speedup"].is_null(),
            row["fusion"] == "off",
            "{row}"
        );
    }
    for row in &rows[..2] {
        assert_eq!(row["scaling_efficiency"].as_f64(), Some(1.0), "{row}");
    }
}

#[test]
fn text_output_has_horovods_lines_and_the_table() {
    let text = stdout(&bench(
        &[&SHORT[..], &["--np", "2", "--compression", "none,bf16"]].concat(),
    ));
    for line in [
        "Model: resnet50 (224x224 images), 25557032 parameters in 161 tensors",
        "Fusion: on, compression: none, 2 rank(s)",
        "Fusion: on, compression: bf16, 2 rank(s)",
        "Iter #0: ",
        "Iter #1: ",
        "Img/sec per rank: ",
        "Total img/sec on 2 rank(s): ",
        "# hvd-bench synthetic  model resnet50  batch 32 per rank",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    let rows: Vec<Vec<&str>> = text
        .lines()
        .rev()
        .take(2)
        .map(|row| row.split_whitespace().collect())
        .collect();
    // fusion, compression, ranks, img/sec/rank, +-, total, scaling (no 1-rank job: -),
    // vs compute, vs fusion off (not measured: -), vs no compression
    let (bf16, none) = (&rows[0], &rows[1]);
    assert_eq!(none.len(), 10, "{none:?}");
    assert_eq!(
        (none[0], none[1], none[2], none[6], none[8], none[9]),
        ("on", "none", "2", "-", "-", "-")
    );
    assert_eq!((bf16[1], bf16[2]), ("bf16", "2"), "{bf16:?}");
    assert!(bf16[9].ends_with('%') && bf16[9] != "-", "{bf16:?}");
    for row in rows {
        let rate: f64 = row[3].parse().unwrap_or(0.0);
        assert!(rate > 0.0 && rate.is_finite(), "{row:?}");
    }
}

#[test]
fn bad_options_fail_before_any_rank_starts() {
    for (args, text) in [
        (&["--np", "2,0"][..], "--np takes rank counts of at least 1"),
        (
            &["--np", "2", "--fusion", "maybe"][..],
            "--fusion takes on, off or a buffer size",
        ),
        (
            &["--np", "2", "--compression", "fp8"][..],
            "--compression takes none, fp16 or bf16",
        ),
        (
            &["--np", "2", "--model", "alexnet"][..],
            "invalid value 'alexnet' for '--model",
        ),
    ] {
        let out = bench(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(text),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_launcher_job_size_outside_np_is_refused() {
    let args = ["synthetic", "--np", "1,4"].map(String::from).to_vec();
    let outcome = hvdrun::Job::new(env!("CARGO_BIN_EXE_hvd-bench"), args, 2)
        .quiet()
        .run()
        .expect("the job runs");
    let hvdrun::JobOutcome::Failed { stderr_tail, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        stderr_tail
            .iter()
            .any(|l| l.contains("a list holding the launcher's job size 2")),
        "{stderr_tail:?}"
    );
}

#[test]
fn a_failing_job_is_named_with_its_rank_count() {
    let out = Command::new(env!("CARGO_BIN_EXE_hvd-bench"))
        .args(["synthetic", "--np", "1,2"])
        .env("HVD_CYCLE_TIME", "soon")
        .output()
        .expect("hvd-bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("the 1-rank job failed"), "{stderr}");
    assert!(stderr.contains("HVD_CYCLE_TIME"), "{stderr}");
}
