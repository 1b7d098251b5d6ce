//! The model's check as a figure: predicted against measured scaling efficiency, one
//! marker per training run, a colour and shape per model, the diagonal where they
//! agree and a band where they agree within 5 points.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::figure::{self, Area, DrawError, Marker};
use crate::synthetic::models::Architecture;

/// One training run: its measured and predicted efficiency (0 to 1).
pub struct Point {
    pub measured: f64,
    pub predicted: f64,
    pub model: Architecture,
}

/// How far from the diagonal a prediction counts as agreeing, in points.
const BAND: f64 = 5.0;

/// Runs above this efficiency on both axes (in %) overlap in the figure's corner.
const CROWDED: f64 = 97.0;

/// The lower end of both axes, in %: a multiple of 10 below every value, so the runs
/// spread over the figure instead of crowding its top right corner.
fn lowest(points: &[Point]) -> f64 {
    let min = points
        .iter()
        .flat_map(|p| [p.measured, p.predicted])
        .fold(100.0f64, |low, e| low.min(e * 100.0));
    (((min - BAND) / 10.0).floor() * 10.0).clamp(0.0, 90.0)
}

/// The models in the order they first appear, each with its runs in %.
fn series(points: &[Point]) -> Vec<(Architecture, Vec<(f64, f64)>)> {
    let mut series: Vec<(Architecture, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let at = (p.measured * 100.0, p.predicted * 100.0);
        match series.iter_mut().find(|(model, _)| *model == p.model) {
            Some((_, runs)) => runs.push(at),
            None => series.push((p.model, vec![at])),
        }
    }
    series
}

fn paint(area: &Area<'_>, points: &[Point]) -> Result<(), DrawError> {
    let agreeing = points
        .iter()
        .filter(|p| ((p.predicted - p.measured) * 100.0).abs() <= BAND)
        .count();
    let area = area.titled("Scaling model: predicted against measured", figure::title())?;
    let (subtitle, area) = area.split_vertically(34);
    subtitle.draw_text(
        &format!(
            "{} training runs on the simulated cluster; {agreeing} predicted within ±{BAND} points",
            points.len()
        ),
        &figure::subtitle().pos(Pos::new(HPos::Center, VPos::Top)),
        (subtitle.dim_in_pixel().0 as i32 / 2, 0),
    )?;
    let (low, high) = (lowest(points), 100.0);
    // A little room past 100 % so the markers of perfect runs are drawn whole.
    let end = high + (high - low) * 0.02;
    // One label every 10 points: plotters picks the widest of 1, 2 or 5 times a power
    // of ten that gives at most this many.
    let labels = ((high - low) / 10.0) as usize + 1;
    let mut chart = ChartBuilder::on(&area)
        .margin(16)
        .x_label_area_size(58)
        .y_label_area_size(74)
        .build_cartesian_2d(low..end, low..end)?;
    chart
        .configure_mesh()
        .x_labels(labels)
        .y_labels(labels)
        .x_desc("measured scaling efficiency (%)")
        .y_desc("predicted scaling efficiency (%)")
        .axis_desc_style(figure::axis_label())
        .label_style(figure::tick_label())
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .bold_line_style(RGBColor(225, 225, 225))
        .max_light_lines(0)
        .draw()?;
    let band = RGBColor(200, 200, 200).mix(0.5);
    chart
        .draw_series(std::iter::once(Polygon::new(
            vec![
                (low, low),
                (low + BAND, low),
                (high, high - BAND),
                (high, high),
                (high - BAND, high),
                (low, low + BAND),
            ],
            band.filled(),
        )))?
        .label(format!("within ±{BAND} points"))
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], band.filled()));
    chart
        .draw_series(LineSeries::new(
            [(low, low), (high, high)],
            BLACK.stroke_width(1),
        ))?
        .label("predicted = measured")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    for (index, (model, runs)) in series(points).into_iter().enumerate() {
        chart
            .draw_series(runs.into_iter().map(|at| Marker::new(at, index, false)))?
            .label(model.title())
            .legend(move |(x, y)| Marker::new((x + 10, y), index, false));
    }
    // Runs that hide their communication all land in the top right corner, one marker
    // on top of another: say how many are there.
    let crowded = points
        .iter()
        .filter(|p| p.measured.min(p.predicted) * 100.0 >= CROWDED)
        .count();
    if crowded > 1 {
        chart.draw_series(std::iter::once(Text::new(
            format!("{crowded} runs at {CROWDED}–100 %, overlapping ↗"),
            (CROWDED - 0.5, high - 0.5),
            figure::legend().pos(Pos::new(HPos::Right, VPos::Center)),
        )))?;
    }
    figure::draw_legend(&mut chart)
}

/// The figure of `points`, as SVG.
pub fn svg(points: &[Point]) -> Result<String, String> {
    figure::draw((760, 800), |area| paint(area, points))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(model: Architecture, measured: f64, predicted: f64) -> Point {
        Point {
            measured,
            predicted,
            model,
        }
    }

    #[test]
    fn the_figure_has_its_title_axes_and_every_model() {
        let svg = svg(&[
            point(Architecture::Resnet101, 0.999, 0.998),
            point(Architecture::Resnet101, 0.98, 0.99),
            point(Architecture::Vgg16, 0.43, 0.47),
            point(Architecture::Inception3, 0.99, 0.90),
        ])
        .unwrap();
        let texts = figure::texts(&svg);
        for text in [
            "Scaling model: predicted against measured",
            "4 training runs on the simulated cluster; 3 predicted within ±5 points",
            "2 runs at 97–100 %, overlapping ↗",
            "measured scaling efficiency (%)",
            "predicted scaling efficiency (%)",
            "ResNet-101",
            "VGG-16",
            "Inception v3",
            "predicted = measured",
            "within ±5 points",
            // The axes start at the multiple of 10 below the lowest run, less 5 points.
            "30",
            "100",
        ] {
            assert!(texts.contains(&text), "{text} is missing from {texts:?}");
        }
        assert!(!texts.contains(&"20"), "{texts:?}");
    }

    #[test]
    fn axes_start_below_the_lowest_run() {
        assert_eq!(lowest(&[point(Architecture::Vgg16, 0.999, 0.97)]), 90.0);
        assert_eq!(lowest(&[point(Architecture::Vgg16, 0.02, 0.5)]), 0.0);
        assert_eq!(lowest(&[point(Architecture::Vgg16, 0.6, 0.56)]), 50.0);
    }
}
