//! The figures of `ember report`, drawn as SVG documents (plotters' SVG backend) to be
//! inlined in the page: lines over a numeric or categorical x axis, and bars.

use anyhow::anyhow;
use plotters::prelude::*;

/// One line of a figure.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its legend entry.
    pub name: String,
    /// Its points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// How a figure's axes read.
#[derive(Clone, Debug, Default)]
pub struct Axes {
    /// The figure's caption inside the image.
    pub title: String,
    /// What the x axis shows.
    pub x: String,
    /// What the y axis shows.
    pub y: String,
    /// Plot x on a log10 scale (every x must be positive).
    pub log_x: bool,
    /// Names of the x positions 0, 1, 2, ... (a categorical axis), if any.
    pub categories: Vec<String>,
}

const SIZE: (u32, u32) = (900, 480);

fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return None;
    }
    if lo == hi {
        return Some((lo - 0.5, hi + 0.5));
    }
    Some((lo, hi))
}

/// A figure of lines; `None` when there is nothing to draw.
pub fn lines(axes: &Axes, series: &[Series]) -> anyhow::Result<Option<String>> {
    let tx = |x: f64| if axes.log_x { x.log10() } else { x };
    let xs = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| !axes.log_x || *x > 0.0);
    let Some((x0, x1)) = range(xs.map(tx)) else { return Ok(None) };
    let Some((_, y1)) = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1))) else {
        return Ok(None);
    };
    let y0 = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0f64, |lo, v| {
        if v.is_finite() {
            lo.min(v)
        } else {
            lo
        }
    });
    let y1 = if y1 > y0 { y1 * 1.05 } else { y0 + 1.0 };
    let (x0, x1) = if axes.categories.is_empty() { (x0, x1) } else { (x0 - 0.5, x1 + 0.5) };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&axes.title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| anyhow!("{e}"))?;
        let cats = &axes.categories;
        let log_x = axes.log_x;
        let x_fmt = move |v: &f64| -> String {
            if !cats.is_empty() {
                let i = v.round();
                if (v - i).abs() < 1e-6 && i >= 0.0 {
                    return cats.get(i as usize).cloned().unwrap_or_default();
                }
                return String::new();
            }
            let v = if log_x { 10f64.powf(*v) } else { *v };
            crate::report::page::num(v)
        };
        let x_labels = if cats.is_empty() { 10 } else { cats.len().max(2) };
        chart
            .configure_mesh()
            .x_desc(&axes.x)
            .y_desc(&axes.y)
            .x_labels(x_labels)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&|v: &f64| crate::report::page::num(*v))
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|p| p.1.is_finite() && (!log_x || p.0 > 0.0))
                .map(|p| (tx(p.0), p.1))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| anyhow!("{e}"))?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(|e| anyhow!("{e}"))?;
        }
        if series.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 13))
                .draw()
                .map_err(|e| anyhow!("{e}"))?;
        }
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(Some(svg))
}

/// A figure of one bar per category; `None` when there is nothing to draw.
pub fn bars(axes: &Axes, values: &[f64]) -> anyhow::Result<Option<String>> {
    let Some((_, hi)) = range(values.iter().copied().chain([0.0])) else { return Ok(None) };
    if values.is_empty() {
        return Ok(None);
    }
    let n = values.len() as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&axes.title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..n - 0.5, 0.0..hi * 1.1)
            .map_err(|e| anyhow!("{e}"))?;
        let cats = &axes.categories;
        let x_fmt = |v: &f64| -> String {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                cats.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(&axes.x)
            .y_desc(&axes.y)
            .x_labels(values.len().max(2))
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&|v: &f64| crate::report::page::num(*v))
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .draw_series(values.iter().enumerate().map(|(i, v)| {
                let x = i as f64;
                Rectangle::new([(x - 0.35, 0.0), (x + 0.35, *v)], Palette99::pick(i).filled())
            }))
            .map_err(|e| anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(Some(svg))
}
