//! `hvd-bench model` end to end, on measurements made up from known costs: the fit finds
//! them, every run gets a prediction, the plot is an SVG figure, and bad input is named
//! by file and line.

use std::path::Path;
use std::process::{Command, Output};

fn model(dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hvd-bench"))
        .args(["model", "--measurements"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("hvd-bench runs")
}

/// Allreduce times of a ring with 100 us per step and 8 ns per byte (1 Gbit/s).
fn allreduce_lines() -> String {
    let mut lines = String::new();
    for n in [2usize, 4, 8] {
        for bytes in [65536usize, 4 << 20, 64 << 20] {
            let steps = 2.0 * (n as f64 - 1.0);
            let seconds = steps * 100e-6 + steps / n as f64 * bytes as f64 * 8e-9;
            lines += &format!(
                "{{\"link\":\"1gbit\",\"hosts\":{n},\"op\":\"allreduce\",\"np\":{n},\"bytes\":{bytes},\"time_us_median\":{}}}\n",
                seconds * 1e6
            );
        }
    }
    lines
}

const RUNS: &str = "\
{\"link\":\"1gbit\",\"hosts\":8,\"op\":\"synthetic\",\"model\":\"vgg16\",\"np\":8,\"fusion\":\"on\",\"compression\":\"none\",\"compute_ms\":5555.6,\"compute_efficiency\":0.40}
{\"link\":\"1gbit\",\"hosts\":8,\"op\":\"synthetic\",\"model\":\"vgg16\",\"np\":8,\"fusion\":\"on\",\"compression\":\"bf16\",\"compute_ms\":5555.6,\"compute_efficiency\":0.66}
{\"link\":\"1gbit\",\"hosts\":2,\"op\":\"synthetic\",\"model\":\"resnet101\",\"np\":2,\"fusion\":\"off\",\"compression\":\"none\",\"compute_ms\":6888.0,\"compute_efficiency\":0.99}
";

#[test]
fn the_fit_finds_the_costs_and_every_run_is_predicted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allreduce.jsonl"), allreduce_lines()).unwrap();
    std::fs::write(dir.path().join("synthetic.jsonl"), RUNS).unwrap();
    let plot = dir.path().join("model.svg");
    let out = model(dir.path(), &["--plot", plot.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1gbit       8 ranks  alpha    100.0 us  beta 8.000 ns/byte (1.00 Gbit/s, 100% of the link)"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| l.ends_with("pt")).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(
        rows[1].contains("vgg16") && rows[1].contains("bf16"),
        "{}",
        rows[1]
    );
    assert!(
        stdout.contains("# 3 runs predicted; largest error"),
        "{stdout}"
    );
    for model in ["resnet101", "inception3", "vgg16"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with(model) && l.contains("on TCP")),
            "{model}: {stdout}"
        );
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg "), "{svg}");
    assert!(
        svg.contains("3 training runs on the simulated cluster;"),
        "{svg}"
    );
}

#[test]
fn missing_and_malformed_measurements_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = model(dir.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("allreduce.jsonl: No such file or directory"),
        "{stderr}"
    );
    std::fs::write(dir.path().join("allreduce.jsonl"), "{\"link\": 1gbit}\n").unwrap();
    let stderr = String::from_utf8_lossy(&model(dir.path(), &[]).stderr).into_owned();
    assert!(
        stderr.starts_with("hvd-bench: ")
            && stderr.contains("allreduce.jsonl:1:11: expected `,` or `}`: {\"link\": 1gbit}"),
        "{stderr}"
    );
    std::fs::write(dir.path().join("allreduce.jsonl"), allreduce_lines()).unwrap();
    std::fs::write(
        dir.path().join("synthetic.jsonl"),
        RUNS.replace("\"vgg16\"", "\"alexnet\""),
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&model(dir.path(), &[]).stderr).into_owned();
    assert!(
        stderr.starts_with("hvd-bench: ")
            && stderr.contains("synthetic.jsonl:1: a model hvd-bench does not know, \"alexnet\""),
        "{stderr}"
    );
}
