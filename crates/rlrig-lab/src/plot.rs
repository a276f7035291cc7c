//! PNG charts: grouped bars for `rlrig compare`, learning curves for `rlrig plot`.
//! Bitmap output with an embedded DejaVu Sans, so no system font or library is needed.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::LabError;

static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font, shipped with the crate.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> LabError + '_ {
    move |e| LabError::Plot {
        path: path.to_path_buf(),
        why: e.to_string(),
    }
}

/// Grouped bars: one group per category, one bar per series (`(name, values)`).
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<(), LabError> {
    register_font();
    let e = err(path);
    let width = (240 + 60 * categories.len() * series.len().max(1)).clamp(800, 4000) as u32;
    let root = BitMapBackend::new(path, (width, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    let ymax = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        * 1.15;
    let n = categories.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(260)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax.max(1e-9))
        .map_err(&e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_label)
        .x_labels(0)
        .y_label_style(("sans-serif", 14))
        .draw()
        .map_err(&e)?;
    // Category names under each group, rotated, drawn in pixel coordinates so they sit
    // in the label area below the plot.
    let label_style = ("sans-serif", 14)
        .into_font()
        .transform(FontTransform::Rotate90)
        .color(&BLACK);
    for (i, c) in categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(c.clone(), (px - 7, py + 8), label_style.clone()))
            .map_err(&e)?;
    }
    let k = series.len().max(1) as f64;
    for (si, (name, values)) in series.iter().enumerate() {
        let color = COLORS[si % COLORS.len()];
        chart
            .draw_series(
                values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite())
                    .map(|(ci, v)| {
                        let x0 = ci as f64 + 0.1 + 0.8 * si as f64 / k;
                        let x1 = x0 + 0.8 / k;
                        Rectangle::new([(x0, 0.0), (x1, *v)], color.filled())
                    }),
            )
            .map_err(&e)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], color.filled()));
    }
    legend(&mut chart, path, SeriesLabelPosition::UpperRight, Some(16))?;
    root.present().map_err(&e)?;
    Ok(())
}

/// A panel's axes over x in `0..x1` and y in `y0..y1` (padded by 5 %), the x axis in
/// [`human`] units: `caption` in a `font`-pixel face, `sizes` the margin and the x and
/// y label areas.
fn axes<'a, 'b>(
    area: &'a DrawingArea<BitMapBackend<'b>, Shift>,
    path: &Path,
    (caption, font): (String, u32),
    [margin, x_area, y_area]: [u32; 3],
    (x1, y0, y1): (f64, f64, f64),
    (xlabel, ylabel): (&str, &str),
) -> Result<
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    LabError,
> {
    let e = err(path);
    let pad = ((y1 - y0) * 0.05).max(1e-6);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", font))
        .margin(margin)
        .x_label_area_size(x_area)
        .y_label_area_size(y_area)
        .build_cartesian_2d(0f64..x1, (y0 - pad)..(y1 + pad))
        .map_err(&e)?;
    chart
        .configure_mesh()
        .x_desc(xlabel)
        .y_desc(ylabel)
        .x_label_formatter(&|x| human(*x))
        .draw()
        .map_err(&e)?;
    Ok(chart)
}

/// The series' labels in a white box with a black border at `position`, in a
/// `font`-pixel face (`None`: plotters' default).
fn legend<'a, 'b: 'a>(
    chart: &mut ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    path: &Path,
    position: SeriesLabelPosition,
    font: Option<u32>,
) -> Result<(), LabError> {
    let mut labels = chart.configure_series_labels();
    if let Some(size) = font {
        labels.label_font(("sans-serif", size));
    }
    labels
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(err(path))
}

/// One curve per run: `(name, points)` with points `(x, y)`.
pub type Curves = [(String, Vec<(f64, f64)>)];

/// Mean of each point and the `w - 1` before it: RL returns are noisy per iteration.
fn smooth(points: &[(f64, f64)], w: usize) -> Vec<(f64, f64)> {
    (0..points.len())
        .map(|i| {
            let lo = (i + 1).saturating_sub(w);
            let win = &points[lo..=i];
            (
                points[i].0,
                win.iter().map(|p| p.1).sum::<f64>() / win.len() as f64,
            )
        })
        .collect()
}

/// Learning curves in two panels: return against environment steps and against wall
/// time, each curve a moving average over 20 iterations.
pub fn learning_curves(path: &Path, by_steps: &Curves, by_time: &Curves) -> Result<(), LabError> {
    register_font();
    let e = err(path);
    let root = BitMapBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    let panels = root.split_evenly((1, 2));
    let smoothed = |c: &Curves| -> Vec<(String, Vec<(f64, f64)>)> {
        c.iter()
            .map(|(n, p)| {
                let clean: Vec<(f64, f64)> = p
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect();
                (n.clone(), smooth(&clean, 20))
            })
            .collect()
    };
    let (by_steps, by_time) = (smoothed(by_steps), smoothed(by_time));
    for (area, (curves, xlabel)) in panels.iter().zip([
        (&by_steps, "environment steps"),
        (&by_time, "wall time (s)"),
    ]) {
        let pts = curves
            .iter()
            .flat_map(|(_, p)| p.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite());
        let (mut x1, mut y0, mut y1) = (1e-9f64, f64::INFINITY, f64::NEG_INFINITY);
        for (x, y) in pts {
            x1 = x1.max(*x);
            y0 = y0.min(*y);
            y1 = y1.max(*y);
        }
        if !y0.is_finite() {
            (y0, y1) = (0.0, 1.0);
        }
        let mut chart = axes(
            area,
            path,
            (format!("episode return vs {xlabel}"), 20),
            [14, 45, 70],
            (x1, y0, y1),
            (xlabel, "return (moving average)"),
        )?;
        for (i, (name, p)) in curves.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(2)))
                .map_err(&e)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        legend(&mut chart, path, SeriesLabelPosition::LowerRight, None)?;
    }
    root.present().map_err(&e)?;
    Ok(())
}

/// One learning-curve panel pair of `bench learn`: a title, the (x, mean, min, max)
/// band against env steps and against training seconds, and the threshold.
pub struct BandRow {
    pub title: String,
    pub by_steps: Vec<(f64, f64, f64, f64)>,
    pub by_time: Vec<(f64, f64, f64, f64)>,
    pub threshold: f64,
}

/// One row of two panels per cell (return against env steps and against training
/// seconds): the mean over seeds as a line, min..max over seeds as a shaded band, the
/// threshold as a grey line.
pub fn learning_bands(path: &Path, rows: &[BandRow]) -> Result<(), LabError> {
    register_font();
    let e = err(path);
    let height = 300 * rows.len().max(1) as u32;
    let root = BitMapBackend::new(path, (1400, height)).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    let areas = root.split_evenly((rows.len().max(1), 2));
    for (i, row) in rows.iter().enumerate() {
        for (j, (band, xlabel)) in [
            (&row.by_steps, "environment steps"),
            (&row.by_time, "training time (s)"),
        ]
        .into_iter()
        .enumerate()
        {
            let area = &areas[2 * i + j];
            let (mut x1, mut y0, mut y1) = (1e-9f64, row.threshold, row.threshold);
            for &(x, _, lo, hi) in band.iter() {
                x1 = x1.max(x);
                y0 = y0.min(lo);
                y1 = y1.max(hi);
            }
            let mut chart = axes(
                area,
                path,
                (format!("{} vs {xlabel}", row.title), 18),
                [10, 40, 60],
                (x1, y0, y1),
                (xlabel, "training return"),
            )?;
            let color = COLORS[0];
            let outline: Vec<(f64, f64)> = band
                .iter()
                .map(|p| (p.0, p.3))
                .chain(band.iter().rev().map(|p| (p.0, p.2)))
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    color.mix(0.2).filled(),
                )))
                .map_err(&e)?;
            chart
                .draw_series(LineSeries::new(
                    [(0.0, row.threshold), (x1, row.threshold)],
                    RGBColor(120, 120, 120).stroke_width(1),
                ))
                .map_err(&e)?;
            chart
                .draw_series(LineSeries::new(
                    band.iter().map(|p| (p.0, p.1)),
                    color.stroke_width(2),
                ))
                .map_err(&e)?;
        }
    }
    root.present().map_err(&e)?;
    Ok(())
}

/// `1.23 M`, `456 k`, `7.8`.
pub fn human(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    /// The one number format of the lab's tables, axes and `bench env`: an Atari env's
    /// thousands of steps/s keep their digits (not `0.00 M`), CartPole's millions too.
    #[test]
    fn numbers_keep_their_digits_from_atari_to_cartpole() {
        assert_eq!(human(2_427.0), "2.4 k");
        assert_eq!(human(99_000.0), "99.0 k");
        assert_eq!(human(41_300_000.0), "41.30 M");
        assert_eq!(human(7.84), "7.8");
    }
}
