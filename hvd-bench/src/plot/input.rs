//! The measurements `cargo xtask bench-peers --json` writes, one JSON object a line:
//!
//! ```text
//! {"collective":"allreduce","np":2,"bytes":4096,"implementation":"hvd tcp","time_us_median":6.02,"repeats":3}
//! ```
//!
//! read into bus bandwidth series, as hvd-bench's own reports compute it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clap::ValueEnum;

use crate::bench_op::BenchOp;
use crate::jsonl::{self, Record};
use crate::measure::busbw_gbps;

/// One implementation's bus bandwidth at each size it was measured at.
#[derive(Debug)]
pub struct Series {
    /// The index of the implementation in [`Figure::implementations`].
    pub implementation: usize,
    /// `(bytes, bus bandwidth in GB/s)`, by size.
    pub points: Vec<(usize, f64)>,
}

/// The series of one rank count.
#[derive(Debug)]
pub struct Panel {
    pub np: usize,
    pub series: Vec<Series>,
}

/// What a figure draws: one collective, a panel per rank count.
#[derive(Debug)]
pub struct Figure {
    pub collective: BenchOp,
    /// The measurements' file name, which says where the numbers come from.
    pub source: String,
    /// Every implementation, hvd's first: an implementation's index is its colour and
    /// marker in every panel.
    pub implementations: Vec<String>,
    /// By rank count.
    pub panels: Vec<Panel>,
}

/// One line of the file.
struct Measurement {
    line: usize,
    collective: BenchOp,
    np: usize,
    bytes: usize,
    implementation: String,
    busbw: f64,
}

fn measurement(row: &Record) -> Result<Measurement, String> {
    let name = row.text("collective")?;
    let collective = BenchOp::from_str(name, false).map_err(|_| {
        row.error(format_args!(
            "unknown collective {name:?} (allreduce, allgather, broadcast, alltoall or reducescatter)"
        ))
    })?;
    let np = row.count("np")?;
    let bytes = row.count("bytes")?;
    let time = row.number("time_us_median")?;
    if !(time.is_finite() && time > 0.0) {
        return Err(row.error(format_args!(
            "\"time_us_median\" must be above 0 µs, not {time}"
        )));
    }
    let busbw = busbw_gbps(collective, np, bytes, time);
    if busbw <= 0.0 {
        return Err(row.error(format_args!(
            "{name} on {np} rank moves nothing between ranks: no bus bandwidth to draw"
        )));
    }
    Ok(Measurement {
        line: row.line(),
        collective,
        np,
        bytes,
        implementation: row.text("implementation")?.to_string(),
        busbw,
    })
}

/// hvd's implementations first, then the peers, each in the order the file has them.
fn implementations(measurements: &[Measurement]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for m in measurements {
        if !names.contains(&m.implementation) {
            names.push(m.implementation.clone());
        }
    }
    let (mut hvd, peers): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|name| is_hvd(name));
    hvd.extend(peers);
    hvd
}

/// Whether an implementation is hvd's own (drawn solid; peers are dashed).
pub fn is_hvd(implementation: &str) -> bool {
    implementation == "hvd" || implementation.starts_with("hvd ")
}

impl Figure {
    /// The figure of `collective` in the measurements at `path`.
    pub fn read(path: &Path, collective: BenchOp) -> Result<Figure, String> {
        Figure::from_records(path, &jsonl::read(path)?, collective)
    }

    fn from_records(
        path: &Path,
        records: &[Record],
        collective: BenchOp,
    ) -> Result<Figure, String> {
        if records.is_empty() {
            return Err(format!("{}: no measurements in it", path.display()));
        }
        let all = records
            .iter()
            .map(measurement)
            .collect::<Result<Vec<_>, _>>()?;
        let others: BTreeSet<&str> = all.iter().map(|m| m.collective.name()).collect();
        let drawn: Vec<Measurement> = all
            .into_iter()
            .filter(|m| m.collective == collective)
            .collect();
        if drawn.is_empty() {
            return Err(format!(
                "{}: no {} measurements (it has {})",
                path.display(),
                collective.name(),
                others.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        let implementations = implementations(&drawn);
        // Rank count -> implementation -> size -> (bus bandwidth, line).
        type Sizes = BTreeMap<usize, (f64, usize)>;
        let mut by_np: BTreeMap<usize, BTreeMap<usize, Sizes>> = BTreeMap::new();
        for m in &drawn {
            let index = implementations
                .iter()
                .position(|name| *name == m.implementation)
                .unwrap_or_default();
            let sizes = by_np.entry(m.np).or_default().entry(index).or_default();
            if let Some((_, first)) = sizes.insert(m.bytes, (m.busbw, m.line)) {
                return Err(format!(
                    "{}:{}: a second {} of {} bytes on {} ranks by {} (the first is on line {first})",
                    path.display(),
                    m.line,
                    collective.name(),
                    m.bytes,
                    m.np,
                    m.implementation
                ));
            }
        }
        let panels = by_np
            .into_iter()
            .map(|(np, series)| Panel {
                np,
                series: series
                    .into_iter()
                    .map(|(implementation, sizes)| Series {
                        implementation,
                        points: sizes.into_iter().map(|(b, (bw, _))| (b, bw)).collect(),
                    })
                    .collect(),
            })
            .collect();
        Ok(Figure {
            collective,
            source: path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into(),
            ),
            implementations,
            panels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(text: &str) -> Result<Figure, String> {
        let path = Path::new("runs/peers.jsonl");
        Figure::from_records(path, &jsonl::parse(path, text)?, BenchOp::Allreduce)
    }

    fn line(np: usize, bytes: usize, implementation: &str, us: f64) -> String {
        format!(
            "{{\"collective\":\"allreduce\",\"np\":{np},\"bytes\":{bytes},\"implementation\":\"{implementation}\",\"time_us_median\":{us},\"repeats\":3}}\n"
        )
    }

    #[test]
    fn reads_series_per_rank_count_with_hvd_first() {
        let text = [
            line(2, 1_000_000, "Open MPI TCP", 1000.0),
            line(2, 1_000_000, "hvd tcp", 500.0),
            line(2, 1000, "hvd tcp", 10.0),
            line(4, 1_000_000, "hvd tcp", 750.0),
            "{\"collective\":\"broadcast\",\"np\":2,\"bytes\":64,\"implementation\":\"hvd tcp\",\"time_us_median\":1}\n".into(),
        ]
        .concat();
        let figure = figure(&text).unwrap();
        assert_eq!(figure.source, "peers.jsonl");
        assert_eq!(figure.implementations, ["hvd tcp", "Open MPI TCP"]);
        // busbw = bytes / time x 2(n-1)/n: 1 MB in 500 µs on 2 ranks is 2 GB/s.
        let series: Vec<String> = figure
            .panels
            .iter()
            .flat_map(|panel| {
                panel.series.iter().map(|s| {
                    let points: Vec<String> = s
                        .points
                        .iter()
                        .map(|(bytes, gbps)| format!("{bytes} B {gbps:.3} GB/s"))
                        .collect();
                    format!(
                        "np {} #{}: {}",
                        panel.np,
                        s.implementation,
                        points.join(", ")
                    )
                })
            })
            .collect();
        assert_eq!(
            series,
            [
                "np 2 #0: 1000 B 0.100 GB/s, 1000000 B 2.000 GB/s",
                "np 2 #1: 1000000 B 1.000 GB/s",
                "np 4 #0: 1000000 B 2.000 GB/s",
            ]
        );
    }

    #[test]
    fn bad_lines_are_named_by_number() {
        let good = line(2, 4096, "hvd tcp", 6.0);
        assert_eq!(
            figure(&format!("{good}{{\"collective\":\"allreduce\",\"np\":2,")).unwrap_err(),
            "runs/peers.jsonl:2:33: EOF while parsing a value: {\"collective\":\"allreduce\",\"np\":2,"
        );
        assert_eq!(
            figure(&format!("{good}\n{}", line(2, 4096, "hvd tcp", 0.0))).unwrap_err(),
            "runs/peers.jsonl:3: \"time_us_median\" must be above 0 µs, not 0"
        );
        assert_eq!(
            figure(&good.replace("allreduce", "allreduse")).unwrap_err(),
            "runs/peers.jsonl:1: unknown collective \"allreduse\" (allreduce, allgather, broadcast, alltoall or reducescatter)"
        );
        assert_eq!(
            figure(&line(1, 4096, "hvd tcp", 6.0)).unwrap_err(),
            "runs/peers.jsonl:1: allreduce on 1 rank moves nothing between ranks: no bus bandwidth to draw"
        );
        assert_eq!(
            figure(&format!("{good}{good}")).unwrap_err(),
            "runs/peers.jsonl:2: a second allreduce of 4096 bytes on 2 ranks by hvd tcp (the first is on line 1)"
        );
    }

    #[test]
    fn empty_input_and_other_collectives_are_refused() {
        assert_eq!(
            figure("\n\n").unwrap_err(),
            "runs/peers.jsonl: no measurements in it"
        );
        assert_eq!(
            figure(&line(2, 4096, "hvd tcp", 6.0).replace("allreduce", "alltoall")).unwrap_err(),
            "runs/peers.jsonl: no allreduce measurements (it has alltoall)"
        );
    }
}
