//! The bandwidth figure: bus bandwidth against message size, both on log axes, one
//! panel per rank count with the same axes, hvd's implementations solid with filled
//! markers and the peers dashed with hollow ones, and one legend for all panels.

use std::collections::BTreeSet;
use std::ops::Range;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::input::{Figure, Panel, is_hvd};
use crate::figure::{self, Area, DrawError, Marker};

const PANEL_WIDTH: u32 = 500;
const PANEL_HEIGHT: u32 = 470;
/// Room for the title and the subtitle.
const HEADER_HEIGHT: u32 = 100;
const LEGEND_ENTRY_WIDTH: u32 = 245;
const LEGEND_ROW_HEIGHT: u32 = 30;
/// At most this many size labels on an axis, so they never run into each other.
const MOST_SIZE_LABELS: usize = 7;

/// A log axis: its range and the values it labels.
struct LogAxis {
    range: Range<f64>,
    ticks: Vec<f64>,
}

/// Message sizes: every measured size (or every few, when many were), with room
/// either side so the end points are not drawn on the frame.
fn size_axis(figure: &Figure) -> LogAxis {
    let sizes: BTreeSet<usize> = points(figure).map(|(bytes, _)| bytes).collect();
    let (first, last) = (
        sizes.first().copied().unwrap_or(1) as f64,
        sizes.last().copied().unwrap_or(1) as f64,
    );
    let step = sizes.len().div_ceil(MOST_SIZE_LABELS).max(1);
    LogAxis {
        range: first / 1.6..last * 1.6,
        ticks: sizes.into_iter().step_by(step).map(|b| b as f64).collect(),
    }
}

/// Bus bandwidth: from the 1-2-5 value below the lowest to the one above the highest,
/// labelled at each (at each power of ten when that is more than four decades).
fn bandwidth_axis(figure: &Figure) -> LogAxis {
    let (low, high) = points(figure).fold((f64::INFINITY, 0.0f64), |(low, high), (_, bw)| {
        (low.min(bw), high.max(bw))
    });
    let (low, high) = (low / 1.05, high * 1.05);
    let (first_exp, last_exp) = (low.log10().floor() as i32, high.log10().ceil() as i32);
    let mantissas: &[f64] = if last_exp - first_exp > 4 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let candidates: Vec<f64> = (first_exp..=last_exp)
        .flat_map(|exp| mantissas.iter().map(move |m| m * 10f64.powi(exp)))
        .collect();
    let first = candidates.iter().rposition(|&t| t <= low).unwrap_or(0);
    let last = candidates
        .iter()
        .position(|&t| t >= high)
        .unwrap_or(candidates.len() - 1);
    let ticks = candidates[first..=last].to_vec();
    LogAxis {
        range: ticks[0]..ticks[ticks.len() - 1],
        ticks,
    }
}

fn points(figure: &Figure) -> impl Iterator<Item = (usize, f64)> + '_ {
    figure
        .panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|s| s.points.iter().copied())
}

/// A size in binary units: 4 KiB, 1.5 MiB, 512 B.
fn size_label(bytes: f64) -> String {
    let (value, unit) = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|&(unit, _)| bytes >= unit as f64)
        .map_or((bytes, "B"), |(unit, name)| (bytes / unit as f64, name));
    if value.fract() == 0.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// A 1-2-5 tick with as many decimals as it needs: 0.05, 0.2, 5, 20.
fn bandwidth_label(value: f64) -> String {
    let decimals = (-value.log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

fn paint_panel(
    area: &Area<'_>,
    figure: &Figure,
    panel: &Panel,
    (x, y): (&LogAxis, &LogAxis),
) -> Result<(), DrawError> {
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{} ranks", panel.np), figure::caption())
        .margin(12)
        .x_label_area_size(58)
        .y_label_area_size(72)
        .build_cartesian_2d(
            x.range.clone().log_scale().with_key_points(x.ticks.clone()),
            y.range.clone().log_scale().with_key_points(y.ticks.clone()),
        )?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes, log scale)")
        .y_desc("bus bandwidth (GB/s, log scale)")
        .axis_desc_style(figure::axis_label())
        .label_style(figure::tick_label())
        .x_label_formatter(&|bytes| size_label(*bytes))
        .y_label_formatter(&|gbps| bandwidth_label(*gbps))
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()?;
    for series in &panel.series {
        let index = series.implementation;
        let hvd = is_hvd(&figure.implementations[index]);
        let line = figure::colour(index).stroke_width(2);
        let at: Vec<(f64, f64)> = series
            .points
            .iter()
            .map(|&(bytes, gbps)| (bytes as f64, gbps))
            .collect();
        if hvd {
            chart.draw_series(LineSeries::new(at.clone(), line))?;
        } else {
            chart.draw_series(DashedLineSeries::new(at.clone(), 8, 5, line))?;
        }
        chart.draw_series(at.into_iter().map(|at| Marker::new(at, index, hvd)))?;
    }
    Ok(())
}

/// One legend for every panel, as a grid of `columns` entries a row.
fn paint_legend(area: &Area<'_>, figure: &Figure, columns: usize) -> Result<(), DrawError> {
    let entry_width = (area.dim_in_pixel().0 as i32 - 40) / columns as i32;
    for (index, name) in figure.implementations.iter().enumerate() {
        let x = 20 + (index % columns) as i32 * entry_width;
        let y = 14 + (index / columns) as i32 * LEGEND_ROW_HEIGHT as i32;
        let hvd = is_hvd(name);
        let line = figure::colour(index).stroke_width(2);
        if hvd {
            area.draw(&PathElement::new([(x, y), (x + 40, y)], line))?;
        } else {
            area.draw(&DashedPathElement::new([(x, y), (x + 40, y)], 8, 5, line))?;
        }
        area.draw(&Marker::new((x + 20, y), index, hvd))?;
        let text = figure::legend().pos(Pos::new(HPos::Left, VPos::Center));
        area.draw_text(name, &text, (x + 50, y))?;
    }
    Ok(())
}

fn paint(area: &Area<'_>, figure: &Figure, columns: usize) -> Result<(), DrawError> {
    let title = format!(
        "{}: bus bandwidth against message size",
        figure.collective.name()
    );
    let area = area.titled(&title, figure::title())?;
    let (subtitle, area) = area.split_vertically(HEADER_HEIGHT - 60);
    subtitle.draw_text(
        &format!(
            "busbw as nccl-tests defines it, higher is better; hvd solid, its peers dashed; data: {}",
            figure.source
        ),
        &figure::subtitle().pos(Pos::new(HPos::Center, VPos::Top)),
        (subtitle.dim_in_pixel().0 as i32 / 2, 0),
    )?;
    let (panels, legend) = area.split_vertically(PANEL_HEIGHT);
    let axes = (&size_axis(figure), &bandwidth_axis(figure));
    let areas = panels.split_evenly((1, figure.panels.len()));
    for (area, panel) in areas.iter().zip(&figure.panels) {
        paint_panel(area, figure, panel, axes)?;
    }
    paint_legend(&legend, figure, columns)
}

/// The figure, as SVG.
pub fn svg(figure: &Figure) -> Result<String, String> {
    let panels = figure.panels.len().max(1) as u32;
    let width = (panels * PANEL_WIDTH + 40).max(2 * LEGEND_ENTRY_WIDTH + 40);
    let series = figure.implementations.len().max(1);
    let columns = (((width - 40) / LEGEND_ENTRY_WIDTH) as usize).clamp(1, series);
    let rows = series.div_ceil(columns) as u32;
    let height = HEADER_HEIGHT + PANEL_HEIGHT + rows * LEGEND_ROW_HEIGHT + 10;
    figure::draw((width, height), |area| paint(area, figure, columns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_op::BenchOp;
    use crate::plot::input::Series;

    fn example() -> Figure {
        let series = |implementation, scale: f64| Series {
            implementation,
            points: vec![
                (4096, 0.5 * scale),
                (1 << 20, 3.0 * scale),
                (64 << 20, 4.1 * scale),
            ],
        };
        Figure {
            collective: BenchOp::Allreduce,
            source: "bench-peers.jsonl".into(),
            implementations: vec!["hvd tcp".into(), "hvd shm".into(), "Open MPI TCP".into()],
            panels: vec![
                Panel {
                    np: 2,
                    series: vec![series(0, 1.0), series(1, 2.0), series(2, 0.8)],
                },
                Panel {
                    np: 4,
                    series: vec![series(0, 0.5), series(2, 0.3)],
                },
            ],
        }
    }

    #[test]
    fn the_figure_has_its_title_axes_panels_and_every_series() {
        let svg = svg(&example()).unwrap();
        let texts = figure::texts(&svg);
        for text in [
            "allreduce: bus bandwidth against message size",
            "busbw as nccl-tests defines it, higher is better; hvd solid, its peers dashed; data: bench-peers.jsonl",
            "message size (bytes, log scale)",
            "bus bandwidth (GB/s, log scale)",
            "2 ranks",
            "4 ranks",
            "hvd tcp",
            "hvd shm",
            "Open MPI TCP",
            "4 KiB",
            "1 MiB",
            "64 MiB",
            // 0.15 to 8.2 GB/s: 1-2-5 ticks from 0.1 to 10.
            "0.1",
            "0.2",
            "5",
            "10",
        ] {
            assert!(texts.contains(&text), "{text} is missing from {texts:?}");
        }
        // The legend names each implementation once, whatever the number of panels.
        assert_eq!(texts.iter().filter(|t| **t == "hvd tcp").count(), 1);
        assert!(
            !texts.contains(&"0.05") && !texts.contains(&"20"),
            "{texts:?}"
        );
    }

    #[test]
    fn labels_read_as_sizes_and_bandwidths() {
        assert_eq!(size_label(512.0), "512 B");
        assert_eq!(size_label(4096.0), "4 KiB");
        assert_eq!(size_label(1.5 * 1048576.0), "1.5 MiB");
        assert_eq!(size_label(256.0 * 1048576.0), "256 MiB");
        assert_eq!(size_label(2.0 * 1073741824.0), "2 GiB");
        assert_eq!(bandwidth_label(0.05), "0.05");
        assert_eq!(bandwidth_label(0.2), "0.2");
        assert_eq!(bandwidth_label(1.0), "1");
        assert_eq!(bandwidth_label(20.0), "20");
    }

    #[test]
    fn many_sizes_are_labelled_every_few() {
        let mut figure = example();
        figure.panels[0].series[0].points = (12..=28).map(|p| (1usize << p, 1.0)).collect();
        let axis = size_axis(&figure);
        assert_eq!(axis.ticks.len(), 6, "{:?}", axis.ticks);
        assert_eq!(axis.ticks[0], 4096.0);
    }
}
