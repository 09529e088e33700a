//! The figures of `ember demote --experiment` (Wong & Wilkes, *My cache or yours?*, USENIX
//! ATC 2002): hit rate against aggregate cache size (Figures 2 and 7), mean READ latency
//! against array size (Figure 6) and the READ latency distribution (Figure 4).

use crate::plot::{colour, draw_legend, line, png, Canvas, Chart, LineStyle, PAPER};
use ember_sim::demote::experiment::{DemoteReport, SweepPoint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1200, 700);

/// A scheme's line: 2 px, a 3 px dot on every point, an 18 px legend mark.
const SCHEME_LINE: LineStyle = LineStyle { width: 2, dot: 3, mark_len: 18, mark_width: 2 };

/// One line per scheme over the sweep, `point` placing a sweep point.
fn scheme_lines(
    report: &DemoteReport,
    point: impl Fn(&SweepPoint) -> (f64, f64),
) -> Vec<(String, Vec<(f64, f64)>)> {
    report
        .schemes
        .iter()
        .map(|s| {
            let pts = report.sweep.iter().filter(|p| p.scheme == s.scheme).map(&point).collect();
            (s.scheme.to_string(), pts)
        })
        .collect()
}

/// The chart of a sweep figure on `root` over 0..`x_max` and 0..`y_max`: the frame, the mesh
/// (x labelled in whole blocks) and `lines`, one per scheme; the caller adds its reference
/// line and the legend.
fn sweep_chart<'a, 'b>(
    root: &'a Canvas<'b>,
    caption: &str,
    x_desc: String,
    y_desc: &str,
    x_max: f64,
    y_max: f64,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Result<Chart<'a, 'b, RangedCoordf64, RangedCoordf64>, Box<dyn std::error::Error>> {
    let mut chart = PAPER.chart(root, caption, 0.0..x_max, 0.0..y_max)?;
    PAPER
        .mesh(&mut chart)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{}", x.round() as u64))
        .draw()?;
    for (i, (name, pts)) in lines.iter().enumerate() {
        line(&mut chart, name.clone(), pts, colour(i), SCHEME_LINE)?;
    }
    Ok(chart)
}

/// Figures 2 and 7: total hit rate (client + array) against aggregate cache size, one line
/// per scheme, and one unified LRU cache of the same aggregate size (black).
pub fn plot_hit_rate(report: &DemoteReport, trace: &str, path: &Path) -> anyhow::Result<()> {
    let lines =
        scheme_lines(report, |p| (p.aggregate_blocks as f64, p.client_hit_rate + p.array_hit_rate));
    let unified: Vec<(f64, f64)> =
        report.unified.iter().map(|u| (u.blocks as f64, u.hit_rate)).collect();
    let all = lines.iter().flat_map(|l| l.1.iter()).chain(unified.iter());
    let x1 = all.clone().fold(1f64, |m, p| m.max(p.0));
    let y1 = all.fold(0.05f64, |m, p| m.max(p.1)).min(1.0) * 1.05;
    let here =
        (report.base.clients * report.base.client_blocks + report.base.array.capacity) as f64;
    png(path, SIZE, |root| {
        let caption =
            format!("Hit rate vs aggregate cache size (Wong & Wilkes Fig. 2/7) — {trace}");
        let x_desc = format!(
            "aggregate cache size, blocks ({} clients x {} + array)",
            report.base.clients, report.base.client_blocks
        );
        let y_desc = "cumulative hit rate (client + array)";
        let mut chart =
            sweep_chart(root, &caption, x_desc, y_desc, x1 * 1.05, y1.min(1.05), &lines)?;
        let thin = LineStyle { width: 1, dot: 0, mark_len: 18, mark_width: 1 };
        line(&mut chart, "one unified LRU cache", &unified, BLACK, thin)?;
        chart.draw_series(std::iter::once(PathElement::new(
            [(here, 0.0), (here, y1.min(1.05))],
            RGBColor(127, 127, 127).stroke_width(1),
        )))?;
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}

/// Figure 6: mean READ latency against array cache size at a fixed client size, one line per
/// scheme; the dotted line marks the array size equal to the (total) client size.
pub fn plot_latency_vs_array(
    report: &DemoteReport,
    trace: &str,
    path: &Path,
) -> anyhow::Result<()> {
    let lines = scheme_lines(report, |p| (p.array_blocks as f64, p.latency_ms));
    let pts = lines.iter().flat_map(|l| l.1.iter());
    let x1 = pts.clone().fold(1f64, |m, p| m.max(p.0)) * 1.05;
    let y1 = pts.fold(0.1f64, |m, p| m.max(p.1)) * 1.1;
    let clients = (report.base.clients * report.base.client_blocks) as f64;
    png(path, SIZE, |root| {
        let caption =
            format!("Mean READ latency vs array cache size (Wong & Wilkes Fig. 6) — {trace}");
        let x_desc = format!(
            "array cache size, blocks ({} clients x {} blocks)",
            report.base.clients, report.base.client_blocks
        );
        let y_desc = "mean READ latency, ms";
        let mut chart = sweep_chart(root, &caption, x_desc, y_desc, x1, y1, &lines)?;
        let grey = RGBColor(127, 127, 127);
        chart.draw_series((0..40).filter(|k| k % 2 == 0).map(|k| {
            let (a, b) = (y1 * k as f64 / 40.0, y1 * (k + 1) as f64 / 40.0);
            PathElement::new([(clients, a), (clients, b)], grey.stroke_width(1))
        }))?;
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// Figure 4: cumulative READ fraction against READ latency, one step line per scheme.
pub fn plot_cdf(report: &DemoteReport, trace: &str, path: &Path) -> anyhow::Result<()> {
    let x1 =
        report.schemes.iter().flat_map(|s| s.cdf.iter().map(|p| p.0)).fold(0.5f64, f64::max) * 1.05;
    png(path, SIZE, |root| {
        let caption = format!("READ latency distribution (Wong & Wilkes Fig. 4) — {trace}");
        let mut chart = PAPER.chart(root, &caption, 0.0..x1, 0.0..1.02)?;
        PAPER
            .mesh(&mut chart)
            .x_desc("READ latency, ms")
            .y_desc("cumulative fraction of READS")
            .draw()?;
        for (i, s) in report.schemes.iter().enumerate() {
            let mut pts = vec![(0.0, 0.0)];
            let mut last = 0.0;
            for &(x, y) in &s.cdf {
                pts.push((x, last));
                pts.push((x, y));
                last = y;
            }
            pts.push((x1, last));
            let name = format!("{} (mean {:.3} ms)", s.scheme, s.total_latency_ms);
            let style = LineStyle { dot: 0, ..SCHEME_LINE };
            line(&mut chart, name, &pts, colour(i), style)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}
