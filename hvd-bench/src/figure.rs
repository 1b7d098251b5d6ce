//! What hvd-bench's figures share: SVG drawn with plotters, whose text stays `<text>`
//! (no font files, no font library; the viewer picks a sans-serif font), one palette of
//! series colours and markers, and one set of text sizes.

use std::path::Path;

use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters_backend::{BackendCoord, DrawingErrorKind};

pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
pub type DrawError = DrawingAreaErrorKind<std::io::Error>;

const FONT: &str = "sans-serif";

/// Text sizes in plotters' points (an SVG font-size of size / 1.24 pixels).
pub fn title() -> TextStyle<'static> {
    (FONT, 26).into_font().style(FontStyle::Bold).into()
}

pub fn subtitle() -> TextStyle<'static> {
    (FONT, 18).into_font().color(&RGBColor(70, 70, 70))
}

pub fn caption() -> TextStyle<'static> {
    (FONT, 21).into_font().style(FontStyle::Bold).into()
}

pub fn axis_label() -> TextStyle<'static> {
    (FONT, 19).into()
}

pub fn tick_label() -> TextStyle<'static> {
    (FONT, 17).into()
}

pub fn legend() -> TextStyle<'static> {
    (FONT, 18).into()
}

/// Tableau's ten colours: distinct, and still distinct to most colour-blind readers
/// together with the markers.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of the `index`-th series.
pub fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The marker of the `index`-th series at a point: a circle, triangle, square or
/// diamond, filled or hollow, in the series' colour.
#[derive(Debug)]
pub struct Marker<C> {
    at: C,
    index: usize,
    filled: bool,
}

impl<C> Marker<C> {
    pub fn new(at: C, index: usize, filled: bool) -> Self {
        Marker { at, index, filled }
    }
}

impl<'a, C> PointCollection<'a, C> for &'a Marker<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;

    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Marker<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut points: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = points.next() else {
            return Ok(());
        };
        let style = colour(self.index).stroke_width(2);
        let outline = |corners: &[(i32, i32)]| -> Vec<BackendCoord> {
            corners
                .iter()
                .chain(corners.first())
                .map(|(dx, dy)| (x + dx, y + dy))
                .collect()
        };
        let corners: &[(i32, i32)] = match self.index % 4 {
            0 => return backend.draw_circle((x, y), 5, &style, self.filled),
            1 => &[(0, -7), (6, 4), (-6, 4)],
            2 => &[(-5, -5), (5, -5), (5, 5), (-5, 5)],
            _ => &[(0, -7), (6, 0), (0, 7), (-6, 0)],
        };
        if self.filled {
            backend.fill_polygon(outline(corners), &style)
        } else {
            backend.draw_path(outline(corners), &style)
        }
    }
}

/// Draws a figure of `size` pixels on a white background and returns the SVG text.
pub fn draw(
    size: (u32, u32),
    paint: impl FnOnce(&Area<'_>) -> Result<(), DrawError>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        area.fill(&WHITE)
            .and_then(|()| paint(&area))
            .and_then(|()| area.present())
            .map_err(|e| format!("drawing the figure failed: {e}"))?;
    }
    Ok(svg)
}

/// Writes a drawn figure to `path`.
pub fn save(path: &Path, svg: &str) -> Result<(), String> {
    std::fs::write(path, svg).map_err(|e| format!("{}: {e}", path.display()))
}

/// The text of every `<text>` element of an SVG figure, in order (XML escapes left as
/// they are).
#[cfg(test)]
pub fn texts(svg: &str) -> Vec<&str> {
    svg.split("<text")
        .skip(1)
        .filter_map(|element| {
            let body = &element[element.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim())
        })
        .collect()
}

/// Draws a chart's legend the one way every figure does: lower right, on white, boxed.
pub fn draw_legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
) -> Result<(), DrawError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(legend())
        .margin(14)
        .background_style(WHITE)
        .border_style(RGBColor(150, 150, 150))
        .draw()
}
