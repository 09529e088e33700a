//! The figures of `ember analyze` (Bonfire, FAST 2013, Figures 1-4; SieveStore's popularity
//! skew; the LRU miss-ratio curve) as PNG.

use crate::plot::{box_mark, colour, draw_legend, line, png, WIDE, WIDE_LINE};
use ember_analyze::report::TraceReport;
use ember_analyze::{Class, REUSE_BUCKETS};
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1100, 680);

/// Grouped bars: one group per x label, one bar per series (the layout of Bonfire Figures
/// 1a, 3 and 4).
fn bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[&str],
    values: &[Vec<f64>],
) -> anyhow::Result<()> {
    let y_max = values.iter().flatten().copied().fold(1.0, f64::max) * 1.1;
    let n = groups.len().max(1);
    png(path, SIZE, |root| {
        let mut chart = WIDE.chart(root, title, 0.0..n as f64, 0.0..y_max)?;
        let g = groups.to_vec();
        let fmt = move |x: &f64| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 1e-9 {
                g.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        WIDE.mesh(&mut chart)
            .disable_x_mesh()
            .x_labels(2 * n + 1)
            .x_label_formatter(&fmt)
            .y_desc(y_desc)
            .draw()?;
        let k = series.len().max(1) as f64;
        for (si, name) in series.iter().enumerate() {
            let c = colour(si);
            chart
                .draw_series(values.iter().enumerate().map(|(gi, v)| {
                    let x0 = gi as f64 + 0.1 + 0.8 * si as f64 / k;
                    Rectangle::new(
                        [(x0, 0.0), (x0 + 0.8 / k, v.get(si).copied().unwrap_or(0.0))],
                        c.filled(),
                    )
                }))?
                .label(*name)
                .legend(box_mark(c, 14));
        }
        draw_legend(&mut chart, SeriesLabelPosition::MiddleRight)?;
        Ok(())
    })
}

/// Lines (`log_x`: x plotted as log10).
fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log_x: bool,
) -> anyhow::Result<()> {
    let tx = |x: f64| if log_x { x.max(1.0).log10() } else { x };
    let pts = series.iter().flat_map(|s| s.1.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(tx(x));
        x1 = x1.max(tx(x));
        y1 = y1.max(y);
    }
    if x0 >= x1 {
        x0 = 0.0;
        x1 = x1.max(1.0);
    }
    png(path, SIZE, |root| {
        let mut chart = WIDE.chart(root, title, x0..x1, 0.0..(y1 * 1.05).max(1e-9))?;
        let fx =
            move |x: &f64| if log_x { format!("{:.0}", 10f64.powf(*x)) } else { format!("{x}") };
        WIDE.mesh(&mut chart)
            .x_desc(if log_x { format!("{x_desc} (log)") } else { x_desc.to_string() })
            .y_desc(y_desc)
            .x_label_formatter(&fx)
            .light_line_style(RGBColor(238, 238, 238))
            .draw()?;
        for (i, (name, p)) in series.iter().enumerate() {
            let p: Vec<(f64, f64)> = p.iter().map(|&(x, y)| (tx(x), y)).collect();
            line(&mut chart, name.clone(), &p, colour(i), WIDE_LINE)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::MiddleRight)?;
        Ok(())
    })
}

/// Write the figures into `dir`: fig1a_classes, fig1b_recency, fig2_daily, fig3_reuse, fig3_reuse_cdf,
/// fig4_spatial, popularity, mrc (.png).
pub fn figures(r: &TraceReport, dir: &Path) -> anyhow::Result<()> {
    let rs = r.named();
    let groups: Vec<String> = rs.iter().map(|x| x.0.clone()).collect();
    let classes: Vec<&str> = Class::ALL.iter().map(|c| c.name()).collect();
    let v: Vec<Vec<f64>> = rs.iter().map(|x| x.1.temporal.class_percent.to_vec()).collect();
    bars(
        &dir.join("fig1a_classes.png"),
        "Relative reaccess temporal pattern (Fig. 1a)",
        "reaccessed blocks (%)",
        &groups,
        &classes,
        &v,
    )?;
    let rec: Vec<(String, Vec<(f64, f64)>)> = rs
        .iter()
        .map(|(n, a)| {
            (
                n.clone(),
                a.temporal
                    .hourly_recency_percent
                    .iter()
                    .enumerate()
                    .map(|(i, &p)| (10.0 * (i + 1) as f64, p))
                    .collect(),
            )
        })
        .collect();
    lines(
        &dir.join("fig1b_recency.png"),
        "Hourly reaccesses by recency (Fig. 1b)",
        "minutes since previous access (bin end)",
        "hourly reaccesses (%)",
        &rec,
        false,
    )?;
    let daily: Vec<(String, Vec<(f64, f64)>)> = r
        .whole
        .temporal
        .daily_by_hour
        .iter()
        .enumerate()
        .filter(|(_, h)| h.iter().sum::<u64>() > 0)
        .map(|(d, h)| {
            (format!("day {d}"), h.iter().enumerate().map(|(i, &n)| (i as f64, n as f64)).collect())
        })
        .collect();
    lines(
        &dir.join("fig2_daily.png"),
        "Daily reaccesses by hour of day (Fig. 2)",
        "wall-clock hour (UTC)",
        "daily reaccesses",
        &daily,
        false,
    )?;
    let names: Vec<&str> = REUSE_BUCKETS.iter().map(|b| b.0).collect();
    let v: Vec<Vec<f64>> = rs
        .iter()
        .map(|x| x.1.reuse.as_ref().map(|u| u.reaccess_bucket_percent.to_vec()).unwrap_or_default())
        .collect();
    bars(
        &dir.join("fig3_reuse.png"),
        "Reuse distance (Fig. 3)",
        "reaccesses (%)",
        &groups,
        &names,
        &v,
    )?;
    let cdf: Vec<(String, Vec<(f64, f64)>)> = rs
        .iter()
        .filter_map(|(n, a)| {
            let u = a.reuse.as_ref()?;
            let total: u64 = u.distribution.iter().map(|x| x.1).sum();
            let mut acc = 0u64;
            let pts = u
                .distribution
                .iter()
                .map(|&(d, c)| {
                    acc += c;
                    ((d + 1) as f64, 100.0 * acc as f64 / total.max(1) as f64)
                })
                .collect();
            Some((n.clone(), pts))
        })
        .collect();
    lines(
        &dir.join("fig3_reuse_cdf.png"),
        "Reuse distance distribution",
        "reuse distance + 1 (blocks)",
        "accesses with a reuse (%, cumulative)",
        &cdf,
        true,
    )?;
    let v: Vec<Vec<f64>> = rs.iter().map(|x| x.1.spatial.mean_percent.to_vec()).collect();
    bars(
        &dir.join("fig4_spatial.png"),
        "Spatial clustering of reaccesses (Fig. 4)",
        "blocks of a region reaccessed (%)",
        &groups,
        &classes,
        &v,
    )?;
    let pop: Vec<(String, Vec<(f64, f64)>)> = r
        .whole
        .popularity
        .days
        .iter()
        .map(|d| {
            (
                format!("day {}", d.day),
                d.cumulative_percent
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| ((i + 1) as f64, c))
                    .collect(),
            )
        })
        .collect();
    lines(
        &dir.join("popularity.png"),
        "Popularity skew per day (SieveStore Fig. 2)",
        "bin (blocks sorted by accesses)",
        "cumulative share of accesses (%)",
        &pop,
        true,
    )?;
    let mut mrc = Vec::new();
    if let Some(e) = &r.whole.mrc.exact {
        mrc.push((
            "exact LRU".to_string(),
            e.sizes.iter().zip(&e.miss_ratio).map(|(&s, &m)| (s as f64, m)).collect(),
        ));
    }
    if let Some(e) = &r.whole.mrc.shards {
        mrc.push((
            "SHARDS".to_string(),
            e.sizes.iter().zip(&e.miss_ratio).map(|(&s, &m)| (s as f64, m)).collect(),
        ));
    }
    lines(
        &dir.join("mrc.png"),
        "LRU miss-ratio curve",
        "cache size (blocks)",
        "miss ratio",
        &mrc,
        true,
    )?;
    Ok(())
}
