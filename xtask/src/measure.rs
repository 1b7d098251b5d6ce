//! What the benchmark commands share: their options, running a benchmark and reading
//! its rows, medians and the way times and ratios are printed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// Median time in microseconds per message size, for one implementation.
pub(crate) type Series = BTreeMap<usize, Vec<f64>>;

/// One table's sweep: hvd-bench's binary, the job size, the message sizes and how many
/// alternating runs each side gets.
pub(crate) struct Sweep<'a> {
    pub bench: &'a Path,
    pub np: usize,
    pub sizes: &'a [usize],
    pub repeats: usize,
}

impl Sweep<'_> {
    /// The sizes as hvd-bench's `--sizes` value and as the MPI peers' arguments.
    pub fn size_args(&self) -> Vec<String> {
        self.sizes.iter().map(usize::to_string).collect()
    }
}

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

/// The speed-up of the medians of alternating runs, and in brackets in how many pairs of
/// runs side by side hvd was the faster (`1.16x (4/5)`): a median ratio near 1.0 from
/// runs that split 2/5 or 3/5 is noise on the host, not a difference between the two.
pub(crate) fn paired_speedup(peer: Option<&[f64]>, hvd: Option<&[f64]>) -> String {
    match (peer, hvd) {
        (Some(peer), Some(hvd)) if !peer.is_empty() && !hvd.is_empty() => {
            let pairs = peer.len().min(hvd.len());
            let faster = peer.iter().zip(hvd).filter(|(p, h)| p > h).count();
            format!("{} ({faster}/{pairs})", speedup(median(peer), median(hvd)))
        }
        _ => "-".into(),
    }
}

/// The runs' medians of `bytes` in `series`, in the order they ran.
pub(crate) fn runs(series: &Series, bytes: usize) -> Option<&[f64]> {
    series.get(&bytes).map(Vec::as_slice)
}

/// What the brackets of [`paired_speedup`] count, for a table's caption.
pub(crate) const PAIRED: &str =
    "in brackets, the pairs of runs side by side in which hvd was the faster";

/// `s` as a JSON string.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One measured median as a JSON object on one line: what `hvd-bench plot` reads.
pub(crate) fn json_row(
    collective: &str,
    np: usize,
    bytes: usize,
    implementation: &str,
    times: &[f64],
) -> Option<String> {
    let median = median(times)?;
    Some(format!(
        "{{\"collective\":{},\"np\":{np},\"bytes\":{bytes},\"implementation\":{},\"time_us_median\":{median:.3},\"repeats\":{}}}",
        json_string(collective),
        json_string(implementation),
        times.len()
    ))
}

/// `--json FILE`: every median of a run, a JSON object a line, written as each table is
/// done (a run cut short keeps what it measured).
pub(crate) struct JsonLines {
    path: PathBuf,
    file: BufWriter<File>,
}

impl JsonLines {
    /// Creates the file now, so that a path that cannot be written fails before the run.
    pub fn create(path: &Path) -> Result<JsonLines, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(JsonLines {
            path: path.to_path_buf(),
            file: BufWriter::new(file),
        })
    }

    /// Writes the median of every size of `series`.
    pub fn write(
        &mut self,
        collective: &str,
        np: usize,
        implementation: &str,
        series: &Series,
    ) -> Result<(), String> {
        for (&bytes, times) in series {
            if let Some(row) = json_row(collective, np, bytes, implementation, times) {
                writeln!(self.file, "{row}")
                    .map_err(|e| format!("{}: {e}", self.path.display()))?;
            }
        }
        self.file
            .flush()
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paired_speedup_counts_the_pairs_hvd_won() {
        let peer = [10.0, 12.0, 9.0, 30.0, 11.0];
        let hvd = [8.0, 13.0, 10.0, 7.0, 10.0];
        assert_eq!(paired_speedup(Some(&peer), Some(&hvd)), "1.10x (3/5)");
        assert_eq!(
            paired_speedup(Some(&peer[..2]), Some(&hvd)),
            "1.20x (1/2)",
            "a run that failed on one side leaves fewer pairs"
        );
        assert_eq!(paired_speedup(None, Some(&hvd)), "-");
        assert_eq!(paired_speedup(Some(&[]), Some(&hvd)), "-");
    }

    #[test]
    fn json_rows_hold_the_median_and_the_repeats() {
        assert_eq!(
            json_row("allreduce", 2, 4096, "hvd tcp", &[7.5, 6.25, 9.0]).as_deref(),
            Some(
                "{\"collective\":\"allreduce\",\"np\":2,\"bytes\":4096,\"implementation\":\"hvd tcp\",\"time_us_median\":7.500,\"repeats\":3}"
            )
        );
        assert_eq!(json_row("allreduce", 2, 4096, "hvd tcp", &[]), None);
        assert_eq!(
            json_string("hvd rdma \"tcp;ofi_rxm\"\\\n"),
            "\"hvd rdma \\\"tcp;ofi_rxm\\\"\\\\\\u000a\""
        );
    }

    #[test]
    fn json_lines_are_written_per_size_in_order() {
        let dir = std::env::temp_dir().join(format!("xtask-json-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("peers.jsonl");
        let mut json = JsonLines::create(&path).unwrap();
        let mut series = Series::new();
        add(&mut series, vec![(65536, 20.0), (4096, 5.0), (65536, 30.0)]);
        json.write("allreduce", 4, "Open MPI TCP", &series).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            text,
            "{\"collective\":\"allreduce\",\"np\":4,\"bytes\":4096,\"implementation\":\"Open MPI TCP\",\"time_us_median\":5.000,\"repeats\":1}\n\
             {\"collective\":\"allreduce\",\"np\":4,\"bytes\":65536,\"implementation\":\"Open MPI TCP\",\"time_us_median\":30.000,\"repeats\":2}\n"
        );
        let missing = Path::new("/nonexistent-dir/peers.jsonl");
        assert_eq!(
            JsonLines::create(missing).err().as_deref(),
            Some("/nonexistent-dir/peers.jsonl: No such file or directory (os error 2)")
        );
    }
}
