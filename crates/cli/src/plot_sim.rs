//! The PNG plots of `ember sim`: hit ratio against cache size per policy, and hit ratio over
//! time (with a line where counting starts after an uncounted warm-up period).

use crate::output::Report;
use crate::plot::{
    colour, draw_legend, line, png, Canvas, DrawResult, Frame, LineStyle, WIDE, WIDE_LINE,
};
use anyhow::anyhow;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1100, 680);

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
fn draw<X>(
    area: &Canvas<'_>,
    caption: &str,
    caption_size: u32,
    x_desc: &str,
    x: X,
    labels: XLabels,
    y_max: f64,
    series: &[Series],
    legend: SeriesLabelPosition,
    mark: Option<f64>,
) -> DrawResult
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let frame = Frame { caption: caption_size, ..WIDE };
    let mut chart = frame.chart(area, caption, x, 0.0..y_max)?;
    let fmt = move |v: &f64| labels.format(*v);
    frame
        .mesh(&mut chart)
        .x_desc(x_desc)
        .y_desc("hit ratio (block accesses)")
        .x_label_formatter(&fmt)
        .y_label_formatter(&|v: &f64| trim(*v))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()?;
    if let Some(x) = mark {
        // Where counting starts: a dashed grey line over the whole height.
        let grey = RGBColor(110, 110, 110);
        let dashes = (0..40).map(|k| {
            let (a, b) = (y_max * k as f64 / 40.0, y_max * (k as f64 + 0.5) / 40.0);
            PathElement::new(vec![(x, a), (x, b)], grey.stroke_width(2))
        });
        chart.draw_series(dashes)?.label("counting starts (warm-up before)").legend(
            move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], grey.stroke_width(2)),
        );
    }
    for (i, s) in series.iter().enumerate() {
        let dot = if s.points.len() <= 60 { 4 } else { 0 };
        let style = LineStyle { dot, ..WIDE_LINE };
        line(&mut chart, s.name.clone(), &s.points, colour(i), style)?;
    }
    draw_legend(&mut chart, legend)?;
    Ok(())
}

/// The top of the y axis: 15 % above the highest point, within 0.05..=1.
fn y_top<'a>(series: impl IntoIterator<Item = &'a Series>) -> f64 {
    let m = series.into_iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
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
    png(path, SIZE, |root| {
        if hi / lo.max(f64::MIN_POSITIVE) >= 10.0 {
            draw(
                root,
                &caption,
                26,
                &desc,
                (lo / 1.25..hi * 1.25).log_scale(),
                XLabels::LogPercent,
                y,
                &series,
                SeriesLabelPosition::UpperLeft,
                None,
            )
        } else {
            let pad = ((hi - lo) * 0.05).max(hi * 0.02);
            draw(
                root,
                &caption,
                26,
                &desc,
                (lo - pad).max(0.0)..hi + pad,
                XLabels::Percent,
                y,
                &series,
                SeriesLabelPosition::UpperLeft,
                None,
            )
        }
    })
}

/// Hit ratio per interval: one panel per policy, one line per cache size. The x axis is
/// hours for time intervals and requests for request-count intervals. After an uncounted
/// warm-up period, a dashed line marks where counting starts (the warm-up's intervals are
/// drawn before it).
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
    let y = y_top(all.iter().copied());
    let cols = if panels.len() > 1 { 2 } else { 1 };
    let rows = panels.len().div_ceil(cols);
    let size = (SIZE.0, 80 + 420 * rows as u32);
    let title = format!(
        "Hit ratio per {} interval: {}",
        report.interval.as_deref().unwrap_or("?"),
        trace_name(report)
    );
    let (desc, labels) = if by_requests {
        ("requests", XLabels::Count)
    } else {
        ("hours since the first request", XLabels::Hours)
    };
    let mark = report.warmup.as_ref().and_then(|w| {
        let s = w.counting_starts_s?;
        Some(if by_requests { w.requests as f64 } else { s / 3600.0 })
    });
    png(path, size, |root| {
        let root = root.titled(&title, ("sans-serif", 26))?;
        for (area, (policy, series)) in root.split_evenly((rows, cols)).iter().zip(&panels) {
            let legend = SeriesLabelPosition::LowerRight;
            draw(area, policy, 20, desc, 0.0..hi, labels, y, series, legend, mark)?;
        }
        Ok(())
    })
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
        // With the line where counting starts: a different picture.
        let mut w = sample();
        w.warmup = Some(crate::output::WarmupNote {
            period: "30min".into(),
            requests: 3,
            block_accesses: 3,
            counting_starts_s: Some(1800.0),
        });
        let q = dir.path().join("timeline_warmup.png");
        timeline(&w, &q, false).unwrap();
        assert_ne!(std::fs::read(&p).unwrap(), std::fs::read(&q).unwrap());
        let series = by_policy(&r);
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].points, vec![(1.0, 0.4)]);
    }
}
