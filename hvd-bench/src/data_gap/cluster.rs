//! Past one machine: the gap to synthetic input at 32 and 128 ranks, modelled from the
//! measured steps.
//!
//! Each rank of a step reaches the allreduce after its data wait and compute, a time
//! drawn from what the ranks of one measured job took per step (a host of that many
//! ranks, feeding them from its own cores; draws are independent, so the model does
//! not know that a host's ranks stall together); the step ends when the last rank has
//! arrived and the ring allreduce of the gradients is done (hvd-bench's cluster model's
//! ring, on the Horovod paper's 25 GbE). A rank that is rarely late is late somewhere in
//! almost every step of a large job: the mean of the largest of n draws is what turns a
//! few % at one rank into tens of % at 128. A host's allreduce slowed by its input
//! pipeline's use of the cores (the benchmark's `comm+`) is slowed alike on every host,
//! so it is added to every modelled step.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::dataset::splitmix;
use crate::figure::{self, Area, DrawError, Marker};
use crate::model::ring::{Ring, wire_beta};

/// The paper's cluster: TCP on 25 GbE, 25 µs a ring step, at 90 % of the wire.
pub fn paper_ring() -> Ring {
    Ring {
        alpha: 25e-6,
        beta: wire_beta(25e9) / 0.9,
    }
}

/// Steps simulated per rank count.
const TRIALS: usize = 2000;

/// The mean step time of `n` ranks whose arrivals are drawn from `arrivals` (seconds),
/// with an allreduce of `bytes` on `ring` after the last arrival.
pub fn mean_step(arrivals: &[f64], n: usize, ring: &Ring, bytes: f64, seed: u64) -> f64 {
    if arrivals.is_empty() || n == 0 {
        return f64::NAN;
    }
    let mut state = seed;
    let mut total = 0.0;
    for _ in 0..TRIALS {
        let last = (0..n)
            .map(|_| arrivals[(splitmix(&mut state) % arrivals.len() as u64) as usize])
            .fold(0.0, f64::max);
        total += last + ring.time(n, bytes);
    }
    total / TRIALS as f64
}

/// What one measured job's steps were made of, for one input mode.
#[derive(Debug, Clone, Copy)]
pub struct Steps<'a> {
    /// Each rank's time to reach the allreduce, every step (seconds).
    pub arrivals: &'a [f64],
    /// The time the host's allreduce took beyond synthetic input's, a step (seconds):
    /// the input pipeline holding the cores the allreduce needs. Every host of the
    /// modelled cluster feeds its ranks from its own cores, so it pays this in every
    /// step whatever the cluster's size (taken once: the mean host's, not the slowest).
    pub comm_excess: f64,
}

/// The modelled gap (0 to 1) at each of `ranks`: 1 - synthetic's throughput over the
/// mode's, both drawn the same way.
pub fn gaps(
    synthetic: &[f64],
    real: Steps<'_>,
    ranks: &[usize],
    ring: &Ring,
    bytes: f64,
) -> Vec<(usize, f64)> {
    ranks
        .iter()
        .map(|&n| {
            let fast = mean_step(synthetic, n, ring, bytes, 1);
            let slow = mean_step(real.arrivals, n, ring, bytes, 2) + real.comm_excess.max(0.0);
            (n, (1.0 - fast / slow).max(0.0))
        })
        .collect()
}

/// One mode in the figure: its measured gaps and its modelled curve, (ranks, gap 0-1).
pub struct Series {
    pub label: String,
    pub measured: Vec<(usize, f64)>,
    pub modelled: Vec<(usize, f64)>,
}

fn log2(ranks: usize) -> f64 {
    (ranks.max(1) as f64).log2()
}

fn paint(area: &Area<'_>, series: &[Series], subtitle: &str) -> Result<(), DrawError> {
    let area = area.titled("Real-data gap against rank count", figure::title())?;
    let (top, area) = area.split_vertically(34);
    top.draw_text(
        subtitle,
        &figure::subtitle().pos(Pos::new(HPos::Center, VPos::Top)),
        (top.dim_in_pixel().0 as i32 / 2, 0),
    )?;
    let highest = series
        .iter()
        .flat_map(|s| s.measured.iter().chain(&s.modelled))
        .map(|p| p.1 * 100.0)
        .fold(10.0f64, f64::max);
    let top_gap = ((highest / 10.0).ceil() * 10.0).min(100.0);
    // Rank counts are powers of two: the x axis is their logarithm, labelled by count.
    let most = series
        .iter()
        .flat_map(|s| s.modelled.iter().chain(&s.measured))
        .map(|p| log2(p.0))
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&area)
        .margin(16)
        .x_label_area_size(58)
        .y_label_area_size(74)
        .build_cartesian_2d(-0.2f64..most + 0.2, 0f64..top_gap)?;
    chart
        .configure_mesh()
        .x_labels(most as usize + 1)
        .x_desc("ranks")
        .y_desc("throughput lost to input against synthetic (%)")
        .axis_desc_style(figure::axis_label())
        .label_style(figure::tick_label())
        .x_label_formatter(&|v| format!("{:.0}", v.exp2()))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .bold_line_style(RGBColor(225, 225, 225))
        .max_light_lines(0)
        .draw()?;
    for (index, s) in series.iter().enumerate() {
        let colour = figure::colour(index);
        let line: Vec<(f64, f64)> = s
            .modelled
            .iter()
            .map(|&(n, g)| (n as f64, g * 100.0))
            .collect();
        chart
            .draw_series(LineSeries::new(line, colour.stroke_width(2)))?
            .label(format!("{}, modelled", s.label))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2)));
        chart
            .draw_series(
                s.measured
                    .iter()
                    .map(|&(n, g)| Marker::new((log2(n), g * 100.0), index, true)),
            )?
            .label(format!("{}, measured", s.label))
            .legend(move |(x, y)| Marker::new((x + 10, y), index, true));
    }
    figure::draw_legend(&mut chart)
}

/// The figure, as SVG.
pub fn svg(series: &[Series], subtitle: &str) -> Result<String, String> {
    figure::draw((900, 640), |area| paint(area, series, subtitle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rare_stalls_cost_little_on_one_rank_and_much_on_many() {
        // Every step takes 50 ms of compute; one step in 20 also waits 50 ms for data.
        let synthetic = vec![0.05; 20];
        let mut real = vec![0.05; 20];
        real[0] = 0.1;
        let ring = paper_ring();
        let steps = |arrivals| Steps {
            arrivals,
            comm_excess: 0.0,
        };
        let curve = gaps(&synthetic, steps(&real), &[1, 32, 128], &ring, 4e6);
        let (one, many) = (curve[0].1, curve[2].1);
        // One rank: 1 step in 20 is 2.5 ms longer on average, about 5 % of a step.
        assert!((0.02..0.08).contains(&one), "{curve:?}");
        // 128 ranks: almost every step has a late rank, nearly doubling it.
        assert!(many > 0.4, "{curve:?}");
        assert!(curve[1].1 > one && many >= curve[1].1, "{curve:?}");
        // Without stalls there is no gap whatever the size.
        let flat = gaps(&synthetic, steps(&synthetic), &[1, 128], &ring, 4e6);
        assert!(flat.iter().all(|p| p.1 < 1e-9), "{flat:?}");
    }

    #[test]
    fn a_slower_allreduce_on_every_host_costs_alike_at_every_size() {
        // No rank is ever late, but every host's allreduce takes 5 ms longer.
        let synthetic = vec![0.05; 20];
        let ring = Ring {
            alpha: 0.0,
            beta: 0.0,
        };
        let real = Steps {
            arrivals: &synthetic,
            comm_excess: 0.005,
        };
        for (n, gap) in gaps(&synthetic, real, &[1, 32, 128], &ring, 4e6) {
            assert!(
                (gap - (1.0 - 0.05 / 0.055)).abs() < 1e-9,
                "{n} ranks: {gap}"
            );
        }
    }

    #[test]
    fn the_ring_adds_its_time_after_the_last_arrival() {
        let ring = Ring {
            alpha: 1e-3,
            beta: 0.0,
        };
        // 4 ranks: 6 steps of 1 ms after 10 ms of compute.
        let step = mean_step(&[0.01], 4, &ring, 1e6, 3);
        assert!((step - 0.016).abs() < 1e-12, "{step}");
        assert!(mean_step(&[], 4, &ring, 1e6, 3).is_nan());
    }

    #[test]
    fn the_figure_names_its_axes_and_series() {
        let series = [Series {
            label: "hvd's loader".into(),
            measured: vec![(1, 0.02), (4, 0.1)],
            modelled: vec![(1, 0.02), (32, 0.3), (128, 0.45)],
        }];
        let svg = svg(&series, "measured on 2 cores").unwrap();
        let texts = figure::texts(&svg);
        for wanted in [
            "ranks",
            "hvd&apos;s loader, modelled",
            "measured on 2 cores",
        ] {
            assert!(
                texts.iter().any(|t| t.contains(wanted)),
                "{wanted} not in {texts:?}"
            );
        }
    }
}
