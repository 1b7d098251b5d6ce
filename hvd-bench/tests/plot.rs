//! `hvd-bench plot` end to end: bench-peers' JSON lines in, an SVG figure out, and a bad
//! file named with its line.

use std::path::Path;
use std::process::{Command, Output};

fn plot(input: &Path, output: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hvd-bench"))
        .args(["plot", "--input"])
        .arg(input)
        .arg("--output")
        .arg(output)
        .output()
        .expect("hvd-bench runs")
}

const RUN: &str = r#"{"collective":"allreduce","np":2,"bytes":4096,"implementation":"hvd tcp","time_us_median":6.000,"repeats":1}
{"collective":"allreduce","np":2,"bytes":1048576,"implementation":"hvd tcp","time_us_median":160.000,"repeats":1}
{"collective":"allreduce","np":2,"bytes":4096,"implementation":"Open MPI TCP","time_us_median":15.500,"repeats":1}
{"collective":"allreduce","np":2,"bytes":1048576,"implementation":"Open MPI TCP","time_us_median":175.000,"repeats":1}
{"collective":"allreduce","np":4,"bytes":4096,"implementation":"hvd tcp","time_us_median":46.700,"repeats":1}
{"collective":"allreduce","np":4,"bytes":1048576,"implementation":"hvd tcp","time_us_median":572.000,"repeats":1}
{"collective":"allgather","np":2,"bytes":67108864,"implementation":"hvd tcp","time_us_median":20000.000,"repeats":1}
"#;

#[test]
fn draws_a_run_as_an_svg_figure() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("peers.jsonl"), dir.path().join("peers.svg"));
    std::fs::write(&input, RUN).unwrap();
    let out = plot(&input, &output);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("# plot: {} (2 panels, 2 series)\n", output.display())
    );
    let svg = std::fs::read_to_string(&output).unwrap();
    assert!(svg.starts_with("<svg "), "{svg}");
    for text in [
        "allreduce: bus bandwidth against message size",
        "2 ranks",
        "4 ranks",
    ] {
        assert!(svg.contains(text), "{text} is missing from {svg}");
    }
}

#[test]
fn a_bad_file_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("peers.jsonl"), dir.path().join("peers.svg"));
    let missing = plot(&input, &output);
    assert!(!missing.status.success());
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr),
        format!(
            "hvd-bench: {}: No such file or directory (os error 2)\n",
            input.display()
        )
    );
    std::fs::write(&input, RUN.replace("\"np\":4", "\"np\":\"four\"")).unwrap();
    let bad = plot(&input, &output);
    assert!(!bad.status.success());
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        format!(
            "hvd-bench: {}:5: \"np\" is not a whole number above 0: \"four\"\n",
            input.display()
        )
    );
    std::fs::write(&input, "").unwrap();
    let empty = plot(&input, &output);
    assert_eq!(
        String::from_utf8_lossy(&empty.stderr),
        format!("hvd-bench: {}: no measurements in it\n", input.display())
    );
    assert!(!output.exists(), "no figure is written from a bad file");
}
