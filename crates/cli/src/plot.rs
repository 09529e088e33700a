//! Chart scaffolding shared by every figure (palette, legend, error handling) and the PNG
//! plots of `ember sim`: hit ratio against cache size per policy, and hit ratio over time.

use crate::output::Report;
use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1100, 680);

/// What a figure's drawing closure returns: plotters' errors boxed, so one closure can use
/// `?` on every drawing call.
pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Turn a figure's drawing result into an error that names the file.
pub fn finish(path: &Path, r: DrawResult) -> anyhow::Result<()> {
    r.map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

/// A colour per series, distinguishable in print (every ember plot uses this palette).
pub(crate) fn colour(i: usize) -> RGBColor {
    const P: [RGBColor; 10] = [
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
    P[i % P.len()]
}

/// The legend every ember figure draws: white translucent box, black border, 14 pt labels,
/// at `position`.
pub(crate) fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
}

/// One named line of points.
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

/// The runs grouped by policy (in first-appearance order), as (cache size % WSS, hit ratio).
fn by_policy(report: &Report) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in &report.rows {
        let name = if r.result.admission == "aod" {
            r.result.policy.clone()
        } else {
            format!("{}+{}", r.result.policy, r.result.admission)
        };
        let x = report.percent_wss(r.result.capacity_blocks);
        let y = r.result.totals.hit_ratio();
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y)),
            None => out.push(Series { name, points: vec![(x, y)] }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// How the x axis is labelled.
#[derive(Clone, Copy)]
enum XLabels {
    /// Percentages on a log axis: label only 1, 2 and 5 times powers of ten.
    LogPercent,
    /// Percentages on a linear axis.
    Percent,
    /// Hours.
    Hours,
    /// Counts (requests), with k / M suffixes.
    Count,
}

impl XLabels {
    fn format(self, x: f64) -> String {
        match self {
            XLabels::LogPercent => {
                let p = 10f64.powf(x.log10().floor());
                let m = x / p;
                if [1.0, 2.0, 5.0].iter().any(|&k| (m - k).abs() < 1e-6) {
                    format!("{}%", trim(x))
                } else {
                    String::new()
                }
            }
            XLabels::Percent => format!("{}%", trim(x)),
            XLabels::Hours => format!("{}h", trim(x)),
            XLabels::Count => {
                if x >= 1e6 {
                    format!("{}M", trim(x / 1e6))
                } else if x >= 1e3 {
                    format!("{}k", trim(x / 1e3))
                } else {
                    trim(x)
                }
            }
        }
    }
}

/// A number with at most 3 significant decimals and no trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// One chart on `area`.
#[allow(clippy::too_many_arguments)]
fn draw<X, DB>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    caption_size: u32,
    x_desc: &str,
    x: X,
    labels: XLabels,
    y_max: f64,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> anyhow::Result<()>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing: {e}");
    let mut chart = ChartBuilder::on(area)
        .margin(16)
        .caption(caption, ("sans-serif", caption_size))
        .x_label_area_size(50)
        .y_label_area_size(64)
        .build_cartesian_2d(x, 0.0..y_max)
        .map_err(|e| err(&e))?;
    let fmt = move |v: &f64| labels.format(*v);
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("hit ratio (block accesses)")
        .x_label_formatter(&fmt)
        .y_label_formatter(&|v: &f64| trim(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3)));
        if s.points.len() <= 60 {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(|e| err(&e))?;
        }
    }
    draw_legend(&mut chart, legend).map_err(|e| err(&e))?;
    Ok(())
}

fn y_top(series: &[Series]) -> f64 {
    let m = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    (m * 1.15).clamp(0.05, 1.0)
}

fn trace_name(report: &Report) -> String {
    Path::new(&report.trace)
        .file_name()
        .map_or(report.trace.clone(), |n| n.to_string_lossy().into_owned())
}

/// Hit ratio against cache size (% of the working set), one line per policy. The x axis is
/// logarithmic when the sizes span a factor of 10 or more.
pub fn hit_ratio_curve(report: &Report, path: &Path) -> anyhow::Result<()> {
    let series = by_policy(report);
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (lo, hi) = xs.fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(x), h.max(x)));
    if !lo.is_finite() || hi <= 0.0 {
        return Err(anyhow!("no runs to plot"));
    }
    let caption = format!("Hit ratio vs cache size: {}", trace_name(report));
    let desc = format!(
        "cache size (% of working set, {} blocks of {} B)",
        report.wss_blocks, report.block_size
    );
    let y = y_top(&series);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
    if hi / lo.max(f64::MIN_POSITIVE) >= 10.0 {
        draw(
            &root,
            &caption,
            26,
            &desc,
            (lo / 1.25..hi * 1.25).log_scale(),
            XLabels::LogPercent,
            y,
            &series,
            SeriesLabelPosition::UpperLeft,
        )
    } else {
        let pad = ((hi - lo) * 0.05).max(hi * 0.02);
        draw(
            &root,
            &caption,
            26,
            &desc,
            (lo - pad).max(0.0)..hi + pad,
            XLabels::Percent,
            y,
            &series,
            SeriesLabelPosition::UpperLeft,
        )
    }
    .with_context(|| format!("drawing {}", path.display()))?;
    root.present().map_err(|e| anyhow!("writing {}: {e}", path.display()))
}

/// Hit ratio per interval: one panel per policy, one line per cache size. The x axis is
/// hours for time intervals and requests for request-count intervals.
pub fn timeline(report: &Report, path: &Path, by_requests: bool) -> anyhow::Result<()> {
    let mut panels: Vec<(String, Vec<Series>)> = Vec::new();
    for r in &report.rows {
        let Some(tl) = &r.result.timeline else { continue };
        let points = tl
            .iter()
            .map(|i| {
                let x =
                    if by_requests { i.start_request as f64 } else { i.start_ns as f64 / 3.6e12 };
                (x, i.counters.hit_ratio())
            })
            .collect();
        let s = Series { name: r.size.clone(), points };
        match panels.iter_mut().find(|p| p.0 == r.result.policy) {
            Some(p) => p.1.push(s),
            None => panels.push((r.result.policy.clone(), vec![s])),
        }
    }
    if panels.is_empty() {
        return Err(anyhow!("no timeline to plot"));
    }
    let all: Vec<&Series> = panels.iter().flat_map(|p| p.1.iter()).collect();
    let hi = all.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(0.0, f64::max);
    let hi = if hi > 0.0 { hi * 1.02 } else { 1.0 };
    let y = (all.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max) * 1.15)
        .clamp(0.05, 1.0);
    let cols = if panels.len() > 1 { 2 } else { 1 };
    let rows = panels.len().div_ceil(cols);
    let size = (SIZE.0, 80 + 420 * rows as u32);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
    let title = format!(
        "Hit ratio per {} interval: {}",
        report.interval.as_deref().unwrap_or("?"),
        trace_name(report)
    );
    let root = root
        .titled(&title, ("sans-serif", 26))
        .map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
    let (desc, labels) = if by_requests {
        ("requests", XLabels::Count)
    } else {
        ("hours since the first request", XLabels::Hours)
    };
    for (area, (policy, series)) in root.split_evenly((rows, cols)).iter().zip(&panels) {
        draw(area, policy, 20, desc, 0.0..hi, labels, y, series, SeriesLabelPosition::LowerRight)
            .with_context(|| format!("drawing {}", path.display()))?;
    }
    root.present().map_err(|e| anyhow!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::sample;

    #[test]
    fn writes_png_files() {
        let dir = tempfile::tempdir().unwrap();
        let r = sample();
        let p = dir.path().join("curve.png");
        hit_ratio_curve(&r, &p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(bytes.len() > 5000, "{} bytes", bytes.len());
        let p = dir.path().join("timeline.png");
        timeline(&r, &p, false).unwrap();
        assert_eq!(&std::fs::read(&p).unwrap()[..4], b"\x89PNG");
        let series = by_policy(&r);
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].points, vec![(1.0, 0.4)]);
    }
}
