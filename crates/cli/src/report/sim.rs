//! `ember sim --out DIR` in a report: the runs' table, hit ratio against cache size, and the
//! timeline when `--interval` recorded one.

use serde_json::Value;

use super::chart::{self, Axes, Series};
use super::page::{configuration, f, num, s, Section};

/// The sections of a `sim.json`.
pub fn sections(doc: &Value) -> anyhow::Result<Vec<Section>> {
    let runs = doc.get("runs").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut config = Section::new("Simulation: configuration");
    config.table(&["parameter", "value"], &configuration(doc, &["runs"]));
    let mut results = Section::new("Simulation: results");
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                s(r, "policy"),
                s(r, "admission"),
                s(r, "size"),
                s(r, "capacity_blocks"),
                num(f(r, "percent_wss")),
                s(r, "hits"),
                s(r, "misses"),
                num(100.0 * f(r, "hit_ratio")),
                num(100.0 * f(r, "read_hit_ratio")),
                s(r, "allocation_writes"),
                s(r, "evictions"),
            ]
        })
        .collect();
    results.table(
        &[
            "policy",
            "admission",
            "size",
            "blocks",
            "% of WSS",
            "hits",
            "misses",
            "hit %",
            "read hit %",
            "allocation-writes",
            "evictions",
        ],
        &rows,
    );
    let mut by_policy: Vec<Series> = Vec::new();
    for r in &runs {
        let name = match s(r, "admission").as_str() {
            "" | "aod" => s(r, "policy"),
            a => format!("{} + {a}", s(r, "policy")),
        };
        let point = (f(r, "percent_wss"), 100.0 * f(r, "hit_ratio"));
        match by_policy.iter_mut().find(|x| x.name == name) {
            Some(x) => x.points.push(point),
            None => by_policy.push(Series { name, points: vec![point] }),
        }
    }
    for x in &mut by_policy {
        x.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let sizes: Vec<f64> = runs.iter().map(|r| f(r, "percent_wss")).filter(|x| *x > 0.0).collect();
    let spread = sizes.iter().cloned().fold(0.0f64, f64::max)
        / sizes.iter().cloned().fold(f64::INFINITY, f64::min);
    let axes = Axes {
        title: "Hit ratio by cache size".into(),
        x: "cache size (% of the working set)".into(),
        y: "hit ratio (%)".into(),
        log_x: spread > 10.0,
        categories: vec![],
    };
    if let Some(svg) = chart::lines(&axes, &by_policy)? {
        results.figure(&svg, "Hit ratio (%) against cache size, one line per policy.");
    }
    let mut sections = vec![config, results];
    let timelines: Vec<Series> = runs
        .iter()
        .filter_map(|r| {
            let t = r.get("timeline")?.as_array()?;
            let points =
                t.iter().map(|p| (f(p, "start_s") / 3600.0, 100.0 * f(p, "hit_ratio"))).collect();
            Some(Series { name: format!("{} {}", s(r, "policy"), s(r, "size")), points })
        })
        .filter(|x| !x.points.is_empty())
        .collect();
    if !timelines.is_empty() {
        let mut t = Section::new("Simulation: timeline");
        let axes = Axes {
            title: "Hit ratio over time".into(),
            x: "trace time (hours)".into(),
            y: "hit ratio in the interval (%)".into(),
            ..Axes::default()
        };
        if let Some(svg) = chart::lines(&axes, &timelines)? {
            t.figure(&svg, "Hit ratio (%) in each interval of the trace, per policy and size.");
        }
        sections.push(t);
    }
    Ok(sections)
}
