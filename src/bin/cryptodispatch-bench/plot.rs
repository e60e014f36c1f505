//! SVG line charts (plotters), drawn from the same numbers the CSV files hold.

use std::error::Error;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// The line `label` through the point `point` gives of each item of `items` it keeps.
    pub fn of<T>(
        label: impl Into<String>,
        items: impl IntoIterator<Item = T>,
        point: impl FnMut(T) -> Option<(f64, f64)>,
    ) -> Self {
        let (label, points) = (label.into(), items.into_iter().filter_map(point).collect());
        Series { label, points }
    }
}

/// A line chart: title, axis labels, series.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    pub series: Vec<Series>,
}

/// The charts' colours, in turn.
pub const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The SVG text of a `size` picture that `draw` draws on a white area, or an error naming
/// `what`.
pub fn svg(
    what: &str,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), Box<dyn Error>>,
) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let drawn = || -> Result<(), Box<dyn Error>> {
            root.fill(&WHITE)?;
            draw(&root)?;
            Ok(root.present()?)
        };
        drawn().map_err(|e| format!("cannot draw {what}: {e}"))?;
    }
    Ok(out)
}

impl Chart<'_> {
    /// Renders the chart as SVG text.
    pub fn svg(&self) -> Result<String, String> {
        svg(self.title, (800, 500), |root| self.draw(root))
    }

    /// Renders and writes `dir/name`.
    pub fn write(&self, dir: &Path, name: &str) -> Result<PathBuf, String> {
        crate::report::write_file(dir, name, &self.svg()?)
    }

    fn draw(&self, root: &DrawingArea<SVGBackend, Shift>) -> Result<(), Box<dyn Error>> {
        let points = || self.series.iter().flat_map(|s| s.points.iter().copied());
        let (x0, x1) = range(points().map(|p| p.0)).unwrap_or((0.0, 1.0));
        let (y0, y1) = range(points().map(|p| p.1)).unwrap_or((0.0, 1.0));
        let pad = ((y1 - y0) * 0.08).max(1e-9);
        let (y0, y1) = (y0 - pad, y1 + pad);
        let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };

        let mut chart = ChartBuilder::on(root)
            .caption(self.title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .x_desc(self.x)
            .y_desc(self.y)
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, s) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        if self.series.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
        Ok(())
    }
}

/// The least and the greatest of `xs`, if any.
fn range(xs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    lo.is_finite().then_some((lo, hi))
}
