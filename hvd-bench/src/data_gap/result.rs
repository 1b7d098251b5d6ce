//! What one job measured of one input mode, the figures derived from it (demand,
//! gap to synthetic input), and how they are printed: one JSON line per rank count and
//! mode, or a table.

use serde_json::{Value, json};

/// An input mode of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Batches ready at once: the throughput the job has without any input pipeline.
    Synthetic,
    /// PyTorch's `DataLoader` with Pillow, as its users run it.
    Torch,
    /// hvd's loader (hvd-data).
    Hvd,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Synthetic, Mode::Torch, Mode::Hvd];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Synthetic => "synthetic",
            Mode::Torch => "torch",
            Mode::Hvd => "hvd",
        }
    }

    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// One job's measurement of one mode, as rank 0 records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub np: usize,
    pub mode: Mode,
    /// Images a second over the timed steps (every rank's images over the slowest
    /// rank's time).
    pub images_per_s: f64,
    /// The loader alone, without compute or allreduce, in images a second (the job's
    /// loaders together); `None` for synthetic input.
    pub capacity: Option<f64>,
    /// Images per rank per step.
    pub batch: usize,
    /// hvd::data_stall's share of the timed steps lost to waiting for data.
    pub data_bound: f64,
    /// The largest share of a rank's wall time its four parts failed to account for.
    pub unaccounted: f64,
    /// Each rank's time to reach the allreduce (data wait + compute) per timed step,
    /// every rank's steps one after another, in seconds: what the cluster model draws.
    pub arrivals: Vec<f64>,
    /// The mean time in the allreduce after the last rank arrived, in seconds.
    pub comm: f64,
}

impl Measured {
    /// The raw record a rank 0 writes for the launching process.
    pub fn to_record(&self) -> String {
        json!({
            "np": self.np,
            "mode": self.mode.name(),
            "images_per_s": self.images_per_s,
            "capacity": self.capacity,
            "batch": self.batch,
            "data_bound": self.data_bound,
            "unaccounted": self.unaccounted,
            "arrivals": self.arrivals,
            "comm": self.comm,
        })
        .to_string()
    }

    pub fn from_record(line: &str) -> Result<Measured, String> {
        let bad = |what: &str| format!("a measurement without a valid {what}: {line}");
        let value: Value = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
        let number = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_f64)
                .ok_or_else(|| bad(name))
        };
        let count = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| bad(name))
        };
        let mode = value
            .get("mode")
            .and_then(Value::as_str)
            .and_then(Mode::parse)
            .ok_or_else(|| bad("mode"))?;
        let arrivals = value
            .get("arrivals")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("arrivals"))?
            .iter()
            .map(|v| v.as_f64().ok_or_else(|| bad("arrivals")))
            .collect::<Result<_, _>>()?;
        Ok(Measured {
            np: count("np")?,
            mode,
            images_per_s: number("images_per_s")?,
            capacity: value.get("capacity").and_then(Value::as_f64),
            batch: count("batch")?,
            data_bound: number("data_bound")?,
            unaccounted: number("unaccounted")?,
            arrivals,
            comm: number("comm")?,
        })
    }
}

/// A row of the report: a measurement beside the synthetic one of the same rank count.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub np: usize,
    pub mode: Mode,
    pub images_per_s: f64,
    /// 1 - images_per_s / synthetic's: the share of the throughput the input costs.
    pub gap: f64,
    pub data_bound: f64,
    pub capacity: Option<f64>,
    /// D = ranks × batch / step time, the step time being synthetic input's.
    pub demand: f64,
    pub unaccounted: f64,
    /// The share of the mode's step that its allreduce took beyond synthetic input's in
    /// the same job ([`comm_excess`]); 0 for synthetic input.
    pub comm_excess: f64,
}

/// The share of synthetic throughput lost (0 when the mode is as fast or faster).
pub fn gap(images_per_s: f64, synthetic: f64) -> f64 {
    if synthetic > 0.0 {
        (1.0 - images_per_s / synthetic).max(0.0)
    } else {
        0.0
    }
}

/// The images a second the job asks for: `np` ranks each taking `batch` images a step.
/// With synthetic input the step time is compute + allreduce alone, so D is synthetic
/// throughput itself.
pub fn demand(np: usize, batch: usize, step_seconds: f64) -> f64 {
    if step_seconds > 0.0 {
        (np * batch) as f64 / step_seconds
    } else {
        f64::INFINITY
    }
}

/// The share of a step of `step_seconds` that its allreduce, `comm` seconds a step after
/// the last rank arrived, took beyond `synthetic_comm`, synthetic input's in the same job.
///
/// hvd::data_stall counts time in a collective as communication: it cannot tell an
/// allreduce slowed by the input pipeline's use of the host's cores (PyTorch's decode
/// processes) from one that is slow on its own, having no synthetic run to compare with.
/// The benchmark has one; the allreduce, its size and the ranks being the same, what
/// it took beyond synthetic input's is the input's cost too. Noise of the host (other
/// work that comes and goes between the modes) lands here as well.
pub fn comm_excess(comm: f64, synthetic_comm: f64, step_seconds: f64) -> f64 {
    if step_seconds > 0.0 {
        ((comm - synthetic_comm) / step_seconds).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// What the loader can deliver at best: the lesser of its capacity and the demand.
pub fn deliverable(capacity: Option<f64>, demand: f64) -> f64 {
    capacity.map_or(demand, |c| c.min(demand))
}

/// Rows in rank count then mode order, each against the synthetic measurement of its
/// rank count (which must be there).
pub fn rows(measured: &[Measured]) -> Result<Vec<Row>, String> {
    let mut rows = Vec::with_capacity(measured.len());
    for m in measured {
        let synthetic = measured
            .iter()
            .find(|s| s.np == m.np && s.mode == Mode::Synthetic)
            .ok_or_else(|| format!("no synthetic measurement with {} ranks", m.np))?;
        let step = (m.np * synthetic.batch) as f64 / synthetic.images_per_s;
        // The mode's own step: every rank's images over the slowest rank's time.
        let own_step = (m.np * m.batch) as f64 / m.images_per_s;
        rows.push(Row {
            np: m.np,
            mode: m.mode,
            images_per_s: m.images_per_s,
            gap: gap(m.images_per_s, synthetic.images_per_s),
            data_bound: m.data_bound,
            capacity: m.capacity,
            demand: demand(m.np, m.batch, step),
            unaccounted: m.unaccounted,
            comm_excess: comm_excess(m.comm, synthetic.comm, own_step),
        });
    }
    rows.sort_by_key(|r| (r.np, r.mode));
    Ok(rows)
}

fn round(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (x * scale).round() / scale
}

/// `{"np":2,"mode":"hvd","images_per_s":..,"gap":..,"data_bound":..,"capacity":..,"demand":..,
/// "comm_excess":..}`,
/// fields in that order whatever serde_json's map keeps.
pub fn json_line(row: &Row) -> String {
    let fields = [
        ("np", json!(row.np)),
        ("mode", json!(row.mode.name())),
        ("images_per_s", json!(round(row.images_per_s, 1))),
        ("gap", json!(round(row.gap, 4))),
        ("data_bound", json!(round(row.data_bound, 4))),
        ("capacity", json!(row.capacity.map(|c| round(c, 1)))),
        ("demand", json!(round(row.demand, 1))),
        ("comm_excess", json!(round(row.comm_excess, 4))),
    ];
    let body: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("\"{name}\":{value}"))
        .collect();
    format!("{{{}}}", body.join(","))
}

pub fn header() -> String {
    format!(
        "# {:>3} {:<10} {:>9} {:>7} {:>11} {:>7} {:>10} {:>9} {:>12} {:>8}",
        "np",
        "mode",
        "img/s",
        "gap",
        "data-bound",
        "comm+",
        "capacity",
        "demand",
        "of min(C,D)",
        "parts"
    )
}

pub fn table_line(row: &Row) -> String {
    let percent = |x: f64| format!("{:.1}%", x * 100.0);
    let capacity = row.capacity.map_or("-".to_string(), |c| format!("{c:.1}"));
    let share = if row.mode == Mode::Synthetic {
        "-".to_string()
    } else {
        percent(row.images_per_s / deliverable(row.capacity, row.demand))
    };
    format!(
        "  {:>3} {:<10} {:>9.1} {:>7} {:>11} {:>7} {:>10} {:>9.1} {:>12} {:>8}",
        row.np,
        row.mode.name(),
        row.images_per_s,
        percent(row.gap),
        percent(row.data_bound),
        percent(row.comm_excess),
        capacity,
        row.demand,
        share,
        format!("±{:.2}%", row.unaccounted * 100.0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(np: usize, mode: Mode, images_per_s: f64, capacity: Option<f64>) -> Measured {
        let comm = if mode == Mode::Synthetic {
            0.002
        } else {
            0.012
        };
        Measured {
            np,
            mode,
            images_per_s,
            capacity,
            batch: 8,
            data_bound: 0.1,
            unaccounted: 0.001,
            arrivals: vec![0.05, 0.06],
            comm,
        }
    }

    #[test]
    fn gap_demand_and_what_a_loader_can_deliver() {
        assert!((gap(90.0, 100.0) - 0.1).abs() < 1e-12);
        assert_eq!(gap(110.0, 100.0), 0.0);
        assert_eq!(gap(1.0, 0.0), 0.0);
        // 4 ranks of 8 images every 50 ms: 640 images a second.
        assert!((demand(4, 8, 0.05) - 640.0).abs() < 1e-9);
        assert!(demand(1, 8, 0.0).is_infinite());
        assert_eq!(deliverable(Some(300.0), 640.0), 300.0);
        assert_eq!(deliverable(Some(900.0), 640.0), 640.0);
        assert_eq!(deliverable(None, 640.0), 640.0);
    }

    #[test]
    fn rows_compare_each_mode_with_synthetic_of_its_rank_count() {
        let all = [
            measured(2, Mode::Hvd, 240.0, Some(250.0)),
            measured(1, Mode::Synthetic, 160.0, None),
            measured(2, Mode::Synthetic, 320.0, None),
            measured(1, Mode::Hvd, 156.0, Some(250.0)),
        ];
        let rows = rows(&all).unwrap();
        let order: Vec<(usize, Mode)> = rows.iter().map(|r| (r.np, r.mode)).collect();
        assert_eq!(
            order,
            [
                (1, Mode::Synthetic),
                (1, Mode::Hvd),
                (2, Mode::Synthetic),
                (2, Mode::Hvd)
            ]
        );
        // Synthetic 320 img/s with 2 × 8 images a step: 50 ms steps, D = 320.
        let hvd2 = &rows[3];
        assert!((hvd2.demand - 320.0).abs() < 1e-9);
        assert!((hvd2.gap - 0.25).abs() < 1e-12);
        assert_eq!(rows[0].gap, 0.0);
        // 2 × 8 images at 240 img/s: 66.7 ms steps, 10 ms of them an allreduce slower than
        // synthetic input's.
        assert!(
            (hvd2.comm_excess - 0.15).abs() < 1e-9,
            "{}",
            hvd2.comm_excess
        );
        assert_eq!(rows[2].comm_excess, 0.0);
        let err = super::rows(&[measured(4, Mode::Hvd, 1.0, None)]).unwrap_err();
        assert_eq!(err, "no synthetic measurement with 4 ranks");
    }

    #[test]
    fn json_lines_carry_the_documented_fields() {
        let all = [
            measured(1, Mode::Synthetic, 160.04, None),
            measured(1, Mode::Torch, 120.0, Some(130.123)),
        ];
        let rows = rows(&all).unwrap();
        assert_eq!(
            json_line(&rows[1]),
            r#"{"np":1,"mode":"torch","images_per_s":120.0,"gap":0.2502,"data_bound":0.1,"capacity":130.1,"demand":160.0,"comm_excess":0.15}"#
        );
        let line: Value = serde_json::from_str(&json_line(&rows[0])).unwrap();
        assert_eq!(line["capacity"], Value::Null);
        assert_eq!(line["mode"], "synthetic");
        assert!(
            table_line(&rows[1]).contains("92.2%"),
            "{}",
            table_line(&rows[1])
        );
    }

    #[test]
    fn comm_excess_is_the_step_share_beyond_synthetic_inputs_allreduce_never_below_zero() {
        assert!((comm_excess(0.03, 0.01, 0.1) - 0.2).abs() < 1e-12);
        assert_eq!(comm_excess(0.01, 0.03, 0.1), 0.0);
        assert_eq!(comm_excess(5.0, 0.0, 0.1), 1.0);
        assert_eq!(comm_excess(0.03, 0.01, 0.0), 0.0);
    }

    #[test]
    fn records_survive_the_trip_through_the_results_file() {
        let m = measured(4, Mode::Torch, 123.5, Some(140.0));
        assert_eq!(Measured::from_record(&m.to_record()).unwrap(), m);
        let err = Measured::from_record(r#"{"np":1,"mode":"tf"}"#).unwrap_err();
        assert!(err.contains("valid mode"), "{err}");
    }
}
