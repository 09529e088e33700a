//! `ember analyze --out DIR` in a report: the trace's summary, Bonfire section 3's
//! characterization (reaccess classes, recency, reuse distance, spatial clustering) and the
//! miss-ratio curve.

use serde_json::Value;

use super::chart::{self, Axes, Series};
use super::page::{f, num, s, scalar, Section};

fn numbers(v: Option<&Value>) -> Vec<f64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// The sections of an `analyze.json`.
pub fn sections(doc: &Value) -> anyhow::Result<Vec<Section>> {
    let whole = doc.get("whole").cloned().unwrap_or(Value::Null);
    let mut summary = Section::new("Analysis: summary");
    let mut rows: Vec<Vec<String>> = vec![vec!["block_size".into(), s(doc, "block_size")]];
    if let Some(Value::Object(m)) = whole.get("summary") {
        rows.extend(m.iter().map(|(k, v)| vec![k.clone(), scalar(v)]));
    }
    summary.table(&["quantity", "whole trace"], &rows);
    let volumes = doc.get("volumes").and_then(Value::as_array).cloned().unwrap_or_default();
    if volumes.len() > 1 {
        let rows: Vec<Vec<String>> = volumes
            .iter()
            .map(|v| {
                let sm = v.pointer("/analysis/summary").cloned().unwrap_or(Value::Null);
                vec![
                    s(v, "name"),
                    s(&sm, "requests"),
                    s(&sm, "wss_blocks"),
                    num(f(&sm, "reaccess_percent")),
                ]
            })
            .collect();
        summary.table(&["volume", "requests", "WSS (blocks)", "reaccessed %"], &rows);
    }
    let mut temporal = Section::new("Analysis: reaccesses (Bonfire Figures 1 and 3)");
    let classes = numbers(whole.pointer("/temporal/class_percent"));
    if classes.len() == 3 {
        temporal.table(
            &["reaccessed blocks by class", "hourly", "daily", "other"],
            &[vec![
                "% (a block may be in several)".into(),
                num(classes[0]),
                num(classes[1]),
                num(classes[2]),
            ]],
        );
    }
    let recency = numbers(whole.pointer("/temporal/hourly_recency_percent"));
    let axes = Axes {
        title: "Hourly reaccesses by time since the previous access".into(),
        x: "minutes since the previous access (10-minute bins)".into(),
        y: "% of hourly reaccesses".into(),
        ..Axes::default()
    };
    let series = vec![Series {
        name: "hourly reaccesses".into(),
        points: recency.iter().enumerate().map(|(i, p)| (10.0 * (i as f64 + 1.0), *p)).collect(),
    }];
    if let Some(svg) = chart::lines(&axes, &series)? {
        temporal.figure(
            &svg,
            "Bonfire Figure 1b: hourly reaccesses (%) by minutes since the previous access.",
        );
    }
    let buckets: Vec<String> = whole
        .pointer("/reuse/buckets")
        .and_then(Value::as_array)
        .map(|b| b.iter().map(scalar).collect())
        .unwrap_or_default();
    let share = numbers(whole.pointer("/reuse/reaccess_bucket_percent"));
    if !buckets.is_empty() && buckets.len() == share.len() {
        let mut header = vec!["reuse distance"];
        header.extend(buckets.iter().map(String::as_str));
        let mut row = vec!["% of reaccesses".to_string()];
        row.extend(share.iter().map(|x| num(*x)));
        temporal.table(&header, &[row]);
    }
    let mut sections = vec![summary, temporal];
    let sizes = numbers(whole.pointer("/mrc/exact/sizes"));
    let miss = numbers(whole.pointer("/mrc/exact/miss_ratio"));
    if !sizes.is_empty() && sizes.len() == miss.len() {
        let mut mrc = Section::new("Analysis: miss-ratio curve");
        let axes = Axes {
            title: "Miss-ratio curve (LRU, exact)".into(),
            x: "cache size (blocks)".into(),
            y: "miss ratio (%)".into(),
            log_x: true,
            categories: vec![],
        };
        let series = vec![Series {
            name: "LRU".into(),
            points: sizes.iter().zip(&miss).map(|(x, m)| (*x, 100.0 * m)).collect(),
        }];
        if let Some(svg) = chart::lines(&axes, &series)? {
            mrc.figure(&svg, "LRU miss ratio (%) against cache size, from exact reuse distances.");
        }
        sections.push(mrc);
    }
    Ok(sections)
}
