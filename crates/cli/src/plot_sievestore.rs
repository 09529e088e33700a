//! The figures of `ember sievestore --experiment` (SieveStore, ISCA 2010): accesses captured
//! per day (Figure 5), allocation-writes per day (Figure 6), drive IOPS occupancy per minute
//! (Figure 8) and drives needed (Figure 9).

use crate::plot::{box_mark, colour, draw_legend, line, png, Frame, LineStyle, PANEL, PAPER};
use ember_sim::sievestore::ensemble::Partition;
use ember_sim::sievestore::experiment::{ExperimentReport, ExperimentRow};
use ember_sim::sievestore::DayStats;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1200, 700);

/// The lines of Figures 8 and 9: a 20 px legend mark 3 px wide, no dots.
const OCCUPANCY_LINE: LineStyle = LineStyle { width: 2, dot: 0, mark_len: 20, mark_width: 3 };

fn ensemble_rows(report: &ExperimentReport) -> Vec<&ExperimentRow> {
    report.rows.iter().filter(|r| r.partition == Partition::Ensemble).collect()
}

/// A figure of bars per day (Figures 5 and 6): a group per day, a bar per configuration of
/// the ensemble cache. `y` is the y axis, `y_label_area` its label area's width; `bars`
/// draws a configuration's day `stats` between `x0` and `x1` in colour `c`.
fn per_day<Y>(
    report: &ExperimentReport,
    path: &Path,
    caption: &str,
    y_label_area: u32,
    y: Y,
    y_desc: &str,
    bars: impl Fn(&DayStats, f64, f64, RGBColor) -> Vec<Rectangle<(f64, f64)>>,
) -> anyhow::Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let rows = ensemble_rows(report);
    let days = report.days.max(1);
    let n = rows.len().max(1) as f64;
    png(path, SIZE, |root| {
        let frame = Frame { y_label_area, ..PAPER };
        let mut chart = frame.chart(root, caption, 0.5f64..days as f64 + 0.5, y)?;
        frame
            .mesh(&mut chart)
            .x_labels(days)
            .x_label_formatter(&|x| format!("day {}", x.round() as i64))
            .x_desc("day")
            .y_desc(y_desc)
            .draw()?;
        for (i, r) in rows.iter().enumerate() {
            let c = colour(i);
            let w = 0.8 / n;
            let day_bars = r.run.days.iter().enumerate().flat_map(|(d, st)| {
                let x0 = d as f64 + 1.0 - 0.4 + i as f64 * w;
                bars(st, x0, x0 + w * 0.9, c)
            });
            chart.draw_series(day_bars)?.label(r.label.clone()).legend(box_mark(c, 16));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// Figure 5: accesses captured per day, one bar per configuration (reads dark, writes light).
pub fn plot_captured(report: &ExperimentReport, trace: &str, path: &Path) -> anyhow::Result<()> {
    let y_max = ensemble_rows(report)
        .iter()
        .flat_map(|r| r.run.days.iter().map(|d| frac(d.hits(), d.accesses)))
        .fold(0.05, f64::max)
        * 1.15;
    per_day(
        report,
        path,
        &format!("Accesses captured per day (SieveStore Fig. 5) — {trace}"),
        PAPER.y_label_area,
        0.0..y_max.min(1.0),
        "fraction of accesses (reads dark, writes light)",
        |st, x0, x1, c| {
            let rd = frac(st.read_hits, st.accesses);
            let wr = frac(st.write_hits, st.accesses);
            vec![
                Rectangle::new([(x0, 0.0), (x1, rd)], c.filled()),
                Rectangle::new([(x0, rd), (x1, rd + wr)], c.mix(0.45).filled()),
            ]
        },
    )
}

/// Figure 6: allocation-writes per day, log scale.
pub fn plot_allocation_writes(
    report: &ExperimentReport,
    trace: &str,
    path: &Path,
) -> anyhow::Result<()> {
    let y_max = ensemble_rows(report)
        .iter()
        .flat_map(|r| r.run.days.iter().map(|d| d.allocation_writes as f64))
        .fold(10.0, f64::max)
        * 3.0;
    per_day(
        report,
        path,
        &format!("Allocation-writes per day (SieveStore Fig. 6) — {trace}"),
        80,
        (1f64..y_max).log_scale(),
        "allocation-writes (blocks, log)",
        |st, x0, x1, c| {
            let v = (st.allocation_writes as f64).max(1.0);
            vec![Rectangle::new([(x0, 1.0), (x1, v)], c.filled())]
        },
    )
}

/// Figure 8: drive IOPS occupancy per minute, (a) SieveStore-D vs WMNA, (b) SieveStore-C vs
/// WMNA (the largest WMNA run, as the paper uses the 32 GB one).
pub fn plot_occupancy(report: &ExperimentReport, trace: &str, path: &Path) -> anyhow::Result<()> {
    let wmna = report.row("wmna-2x").or_else(|| report.row("wmna"));
    let panels: Vec<(&str, Option<&ExperimentRow>)> = vec![
        ("(a) SieveStore-D vs WMNA", report.row("sievestore-d")),
        ("(b) SieveStore-C vs WMNA", report.row("sievestore-c")),
    ];
    let minutes = report.rows.iter().map(|r| r.occupancy.len()).max().unwrap_or(1).max(1);
    let y_max = ensemble_rows(report)
        .iter()
        .flat_map(|r| r.occupancy.iter().copied())
        .fold(0.0, f64::max)
        .max(1e-6)
        * 1.1;
    png(path, (SIZE.0, SIZE.1 + 200), |root| {
        let root = root.titled(
            &format!(
                "Drive IOPS occupancy per minute (SieveStore Fig. 8, {}) — {trace}",
                report.device
            ),
            ("sans-serif", 24),
        )?;
        let areas = root.split_evenly((2, 1));
        for ((title, row), area) in panels.iter().zip(areas.iter()) {
            let mut chart = PANEL.chart(area, title, 0f64..minutes as f64, 0f64..y_max)?;
            PANEL
                .mesh(&mut chart)
                .x_desc("minute of the trace")
                .y_desc("drive IOPS occupancy")
                .draw()?;
            for (i, r) in [wmna, *row].iter().enumerate() {
                let Some(r) = r else { continue };
                let c = if i == 0 { RGBColor(150, 150, 150) } else { colour(i) };
                let pts: Vec<(f64, f64)> =
                    r.occupancy.iter().enumerate().map(|(m, &o)| (m as f64, o)).collect();
                let style = LineStyle { width: 1, ..OCCUPANCY_LINE };
                line(&mut chart, r.label.clone(), &pts, c, style)?;
            }
            draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        Ok(())
    })
}

/// Figure 9: drives needed per minute, minutes sorted by need.
pub fn plot_drives(report: &ExperimentReport, trace: &str, path: &Path) -> anyhow::Result<()> {
    let rows: Vec<&ExperimentRow> = ensemble_rows(report)
        .into_iter()
        .filter(|r| {
            ["sievestore-d", "sievestore-c", "wmna-2x", "aod-2x", "wmna", "aod"]
                .contains(&r.label.as_str())
        })
        .collect();
    let minutes = rows.iter().map(|r| r.occupancy.len()).max().unwrap_or(1).max(1);
    let y_max =
        rows.iter().flat_map(|r| r.occupancy.iter().map(|o| o.ceil())).fold(1.0, f64::max) + 1.0;
    png(path, SIZE, |root| {
        let frame = Frame { y_label_area: 60, ..PAPER };
        let caption = format!("Drives needed (SieveStore Fig. 9) — {trace}");
        let mut chart = frame.chart(root, &caption, 0f64..minutes as f64, 0f64..y_max)?;
        frame
            .mesh(&mut chart)
            .x_desc("minutes, in increasing order of drives needed")
            .y_desc("drives")
            .draw()?;
        for (i, r) in rows.iter().enumerate() {
            let mut d: Vec<f64> = r.occupancy.iter().map(|o| o.ceil().max(1.0)).collect();
            d.sort_by(|a, b| a.total_cmp(b));
            let pts: Vec<(f64, f64)> = d.iter().enumerate().map(|(m, &v)| (m as f64, v)).collect();
            line(&mut chart, r.label.clone(), &pts, colour(i), OCCUPANCY_LINE)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        Ok(())
    })
}

/// `a / b`, 0 when `b` is 0.
fn frac(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
