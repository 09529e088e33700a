//! `ember demote --out DIR` in a report: each scheme's client and array hit rates, mean READ
//! latency and speedup, beside Wong & Wilkes' Tables 2 and 3.

use serde_json::Value;

use super::chart::{self, Axes};
use super::page::{configuration, f, num, s, Section};
use super::papers;

/// The sections of a `demote.json`.
pub fn sections(doc: &Value) -> anyhow::Result<Vec<Section>> {
    let schemes = doc.get("schemes").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut config = Section::new("DEMOTE: configuration");
    let mut rows = configuration(doc.get("base").unwrap_or(&Value::Null), &[]);
    for r in configuration(doc.get("model").unwrap_or(&Value::Null), &[]) {
        rows.push(vec![format!("model.{}", r[0]), r[1].clone()]);
    }
    config.table(&["parameter", "value"], &rows);
    let mut results = Section::new("DEMOTE: results");
    let mut table = Vec::new();
    let (mut names, mut latency, mut array) = (Vec::new(), Vec::new(), Vec::new());
    for sch in &schemes {
        let clients =
            sch.pointer("/result/clients").and_then(Value::as_array).cloned().unwrap_or_default();
        let sum = |k: &str| -> f64 {
            clients
                .iter()
                .map(|c| match c.get(k) {
                    Some(Value::Array(v)) => v.iter().filter_map(Value::as_f64).sum(),
                    Some(v) => v.as_f64().unwrap_or(0.0),
                    None => 0.0,
                })
                .sum()
        };
        let reads = sum("reads").max(1.0);
        let pct = |k: &str| 100.0 * sum(k) / reads;
        names.push(s(sch, "scheme"));
        latency.push(f(sch, "total_latency_ms"));
        array.push(pct("array_hits"));
        table.push(vec![
            s(sch, "scheme"),
            num(sum("reads")),
            num(pct("client_hits")),
            num(pct("array_hits")),
            num(pct("misses")),
            num(f(sch, "total_latency_ms")),
            format!("{}x", num(f(sch, "mean_speedup"))),
        ]);
    }
    results.table(
        &["scheme", "reads", "client %", "array %", "miss %", "mean READ latency (ms)", "speedup"],
        &table,
    );
    let axes = |title: &str, y: &str| Axes {
        title: title.into(),
        x: "scheme".into(),
        y: y.into(),
        log_x: false,
        categories: names.clone(),
    };
    if let Some(svg) = chart::bars(&axes("Array hit rate", "array hits (% of READs)"), &array)? {
        results.figure(&svg, "Array cache hit rate (% of the clients' READs) per scheme.");
    }
    if let Some(svg) = chart::bars(&axes("Mean READ latency", "ms"), &latency)? {
        results.figure(&svg, "Mean READ latency at the client (ms, the latency model) per scheme.");
    }
    let mut paper = Section::new("DEMOTE: the paper's Tables 2 and 3");
    paper.text(&format!(
        "{}: the published single-client synthetic results (N_c = N_a = 16384 blocks). ember \
         trace gen ww-random, ww-seq and ww-zipf generate these workloads; on one of them \
         the NONE-LRU, DEMOTE-LRU and DEMOTE rows above compare with its row here.",
        papers::WONG_WILKES
    ));
    let t2: Vec<Vec<String>> = papers::WW_TABLE2
        .iter()
        .map(|(w, c, a)| {
            vec![w.to_string(), c.to_string(), a[0].to_string(), a[1].to_string(), a[2].to_string()]
        })
        .collect();
    paper.table(
        &[
            "Table 2 workload",
            "client %",
            "array % NONE-LRU",
            "array % DEMOTE-LRU",
            "array % DEMOTE",
        ],
        &t2,
    );
    let t3: Vec<Vec<String>> = papers::WW_TABLE3
        .iter()
        .map(|(w, l, sp)| {
            vec![
                w.to_string(),
                num(l[0]),
                format!("{} ({}x)", num(l[1]), num(sp[0])),
                format!("{} ({}x)", num(l[2]), num(sp[1])),
            ]
        })
        .collect();
    paper.table(
        &["Table 3 workload", "NONE-LRU (ms)", "DEMOTE-LRU (ms, speedup)", "DEMOTE (ms, speedup)"],
        &t3,
    );
    Ok(vec![config, results, paper])
}
