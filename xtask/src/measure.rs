//! What the benchmark commands share: their options, running a benchmark and reading
//! its rows, medians and the way times and ratios are printed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::workspace_root;

/// Median time in microseconds per message size, for one implementation.
pub(crate) type Series = BTreeMap<usize, Vec<f64>>;

pub(crate) struct Options {
    pub nps: Vec<usize>,
    pub sizes: Vec<usize>,
    pub repeats: usize,
    pub peers: PathBuf,
}

fn parse_size(text: &str) -> Result<usize, String> {
    hvd_core::units::parse_bytes("--sizes", text).map_err(|e| e.to_string())
}

pub(crate) fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        nps: vec![2, 4],
        sizes: [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20].to_vec(),
        repeats: 3,
        peers: workspace_root().join("../shared/peers"),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--np" => {
                o.nps = value()?
                    .split(',')
                    .map(|n| n.parse().map_err(|_| format!("bad --np '{n}'")))
                    .collect::<Result<_, _>>()?
            }
            "--sizes" => {
                o.sizes = value()?
                    .split(',')
                    .map(parse_size)
                    .collect::<Result<_, _>>()?
            }
            "--repeats" => o.repeats = value()?.parse().map_err(|_| "bad --repeats".to_string())?,
            "--peers" => o.peers = PathBuf::from(value()?),
            other => {
                return Err(format!(
                    "unknown option '{other}' (--np 2,4 --sizes 4K,1M --repeats 3 --peers DIR)"
                ));
            }
        }
    }
    Ok(o)
}

pub(crate) fn run_capture(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `(bytes, median µs)` of every `RES` line of the MPI peers' output.
pub(crate) fn mpi_rows(stdout: &str, bytes_col: usize, time_col: usize) -> Vec<(usize, f64)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("RES "))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.get(bytes_col)?.parse().ok()?,
                f.get(time_col)?.parse().ok()?,
            ))
        })
        .collect()
}

/// `(bytes, median µs)` of hvd-bench's JSON lines.
pub(crate) fn hvd_rows(stdout: &str) -> Vec<(usize, f64)> {
    let field = |line: &str, key: &str| -> Option<f64> {
        let start = line.find(&format!("\"{key}\":"))? + key.len() + 3;
        let rest = &line[start..];
        rest[..rest.find([',', '}'])?].parse().ok()
    };
    stdout
        .lines()
        .filter_map(|l| Some((field(l, "bytes")? as usize, field(l, "time_us_median")?)))
        .collect()
}

pub(crate) fn add(series: &mut Series, rows: Vec<(usize, f64)>) {
    for (bytes, us) in rows {
        series.entry(bytes).or_default().push(us);
    }
}

pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

pub(crate) fn mpirun(np: usize, btl: &str) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args([
            "--oversubscribe",
            "--mca",
            "pml",
            "ob1",
            "--mca",
            "btl",
            btl,
            "-np",
            &np.to_string(),
        ]);
    if btl.starts_with("tcp") {
        cmd.args(["--mca", "btl_tcp_if_include", "lo"]);
    }
    cmd
}

pub(crate) fn fmt_us(us: Option<f64>) -> String {
    us.map_or_else(
        || "-".into(),
        |us| {
            if us >= 1000.0 {
                format!("{:.2} ms", us / 1e3)
            } else {
                format!("{us:.1} us")
            }
        },
    )
}

pub(crate) fn speedup(peer: Option<f64>, hvd: Option<f64>) -> String {
    match (peer, hvd) {
        (Some(p), Some(h)) => format!("{:.2}x", p / h),
        _ => "-".into(),
    }
}
