//! `ember warmup run --out DIR` in a report: each period's schemes (convergence time, load
//! reduction, preload time, hit rate), the hit-rate timeline of the first period, and Bonfire's
//! Table 3 beside ember's best scheme per period.

use serde_json::Value;

use super::chart::{self, Axes, Series};
use super::page::{configuration, f, num, s, Section};
use super::papers;

fn metrics(period: &Value) -> Vec<Value> {
    period.get("metrics").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn opt(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::Null) | None => "-".into(),
        Some(x) => x.as_f64().map(num).unwrap_or_else(|| s(v, k)),
    }
}

/// The sections of a `warmup.json`.
pub fn sections(doc: &Value) -> anyhow::Result<Vec<Section>> {
    let periods = doc.get("periods").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut config = Section::new("Warmup: configuration");
    config.table(&["parameter", "value"], &configuration(doc, &["periods"]));
    let mut results = Section::new("Warmup: results per period");
    let mut table = Vec::new();
    let mut schemes: Vec<Series> = Vec::new();
    for (i, p) in periods.iter().enumerate() {
        let day = p
            .pointer("/runs/day")
            .and_then(Value::as_f64)
            .map(num)
            .unwrap_or_else(|| (i + 1).to_string());
        for m in metrics(p) {
            table.push(vec![
                day.clone(),
                s(&m, "scheme"),
                opt(&m, "converge_hours"),
                opt(&m, "load_reduction_percent"),
                opt(&m, "preload_minutes"),
                opt(&m, "converge_improvement_percent"),
                opt(&m, "load_improvement_percent"),
                opt(&m, "read_hit_percent"),
            ]);
            let name = s(&m, "scheme");
            let point = (i as f64, f(&m, "converge_hours"));
            match schemes.iter_mut().find(|x| x.name == name) {
                Some(x) => x.points.push(point),
                None => schemes.push(Series { name, points: vec![point] }),
            }
        }
    }
    results.table(
        &[
            "period (day)",
            "scheme",
            "T_converge (h)",
            "load reduction %",
            "preload (min)",
            "T impr. %",
            "load impr. %",
            "read hit %",
        ],
        &table,
    );
    let axes = Axes {
        title: "Convergence time per period".into(),
        x: "period".into(),
        y: "T_converge (hours)".into(),
        log_x: false,
        categories: (1..=periods.len()).map(|i| format!("period {i}")).collect(),
    };
    if let Some(svg) = chart::lines(&axes, &schemes)? {
        results.figure(&svg, "Bonfire's T_converge (eq. 1) of each scheme, per period.");
    }
    let mut sections = vec![config, results];
    if let Some(first) = periods.first() {
        let interval_h =
            first.pointer("/runs/interval_s").and_then(Value::as_f64).unwrap_or(1.0) / 3600.0;
        let runs =
            first.pointer("/runs/runs").and_then(Value::as_array).cloned().unwrap_or_default();
        let series: Vec<Series> = runs
            .iter()
            .map(|r| Series {
                name: s(r, "scheme"),
                points: r
                    .get("timeline")
                    .and_then(Value::as_array)
                    .map(|t| {
                        t.iter()
                            .enumerate()
                            .filter(|(_, p)| f(p, "reads") > 0.0)
                            .map(|(i, p)| {
                                (i as f64 * interval_h, 100.0 * f(p, "read_hits") / f(p, "reads"))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        let axes = Axes {
            title: "Read hit rate after the restart, first period".into(),
            x: "hours into the period".into(),
            y: "read hit rate (%)".into(),
            ..Axes::default()
        };
        if let Some(svg) = chart::lines(&axes, &series)? {
            let mut t = Section::new("Warmup: timeline");
            t.figure(&svg, "Read hit rate (%) in each interval of the first period, per scheme.");
            sections.push(t);
        }
    }
    let best: Vec<Vec<String>> = periods
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let warmed: Vec<Value> = metrics(p)
                .into_iter()
                .filter(|m| !matches!(s(m, "scheme").as_str(), "cold" | "always-warm"))
                .filter(|m| m.get("converge_improvement_percent").is_some_and(|v| !v.is_null()))
                .collect();
            let b = warmed.iter().max_by(|a, b| {
                f(a, "converge_improvement_percent")
                    .total_cmp(&f(b, "converge_improvement_percent"))
                    .then(
                        f(a, "load_improvement_percent")
                            .total_cmp(&f(b, "load_improvement_percent")),
                    )
            })?;
            Some(vec![
                format!("period {}", i + 1),
                s(b, "scheme"),
                num(f(b, "converge_improvement_percent")),
                papers::BONFIRE_TABLE3[0].1.to_string(),
                num(f(b, "load_improvement_percent")),
                papers::BONFIRE_TABLE3[1].1.to_string(),
            ])
        })
        .collect();
    if !best.is_empty() {
        let mut paper = Section::new("Warmup: Bonfire's Table 3 beside ember's");
        paper.text(&format!(
            "{}: over its configurations, the best algorithm per trace improves T_converge over \
             cold by {} and reaches {} server load reduction than cold; here, the best warmed \
             scheme of each period.",
            papers::BONFIRE,
            papers::BONFIRE_TABLE3[0].1,
            papers::BONFIRE_TABLE3[1].1
        ));
        paper.table(
            &[
                "period",
                "best scheme",
                "T impr. % (ember)",
                "T impr. (paper)",
                "load impr. % (ember)",
                "load reduction (paper)",
            ],
            &best,
        );
        sections.push(paper);
    }
    Ok(sections)
}
