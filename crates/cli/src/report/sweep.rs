//! `ember sweep --out DIR` in a report: the grid's results (results.csv), its failures, and
//! hit ratio against cache size per trace and policy.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use super::chart::{self, Axes, Series};
use super::page::Section;

/// Rows shown in the results table; the rest are in results.csv.
const MAX_ROWS: usize = 500;

/// The sections of a sweep's `results.csv` (and `failures.csv` beside it).
pub fn sections(dir: &Path) -> anyhow::Result<Vec<Section>> {
    let path = dir.join("results.csv");
    let mut reader =
        csv::Reader::from_path(&path).with_context(|| format!("reading {}", path.display()))?;
    let header: Vec<String> = reader.headers()?.iter().map(str::to_string).collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in reader.records() {
        rows.push(
            r.with_context(|| format!("reading {}", path.display()))?
                .iter()
                .map(str::to_string)
                .collect(),
        );
    }
    let col = |name: &str| header.iter().position(|h| h == name);
    let mut results = Section::new("Sweep: results");
    results.text(&format!(
        "{} cells{}.",
        rows.len(),
        if rows.len() > MAX_ROWS {
            format!(", the first {MAX_ROWS} shown (all are in results.csv)")
        } else {
            String::new()
        }
    ));
    let shown: Vec<Vec<String>> = rows.iter().take(MAX_ROWS).cloned().collect();
    results.table(&header.iter().map(String::as_str).collect::<Vec<_>>(), &shown);
    if let (Some(t), Some(p), Some(x), Some(y)) =
        (col("trace"), col("policy"), col("percent_wss"), col("hit_ratio"))
    {
        let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for r in &rows {
            let (Ok(xv), Ok(yv)) = (r[x].parse::<f64>(), r[y].parse::<f64>()) else { continue };
            let trace = Path::new(&r[t])
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            lines.entry(format!("{trace} {}", r[p])).or_default().push((xv, 100.0 * yv));
        }
        let series: Vec<Series> = lines
            .into_iter()
            .map(|(name, mut points)| {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { name, points }
            })
            .collect();
        let axes = Axes {
            title: "Hit ratio by cache size".into(),
            x: "cache size (% of the working set)".into(),
            y: "hit ratio (%)".into(),
            log_x: false,
            categories: vec![],
        };
        if let Some(svg) = chart::lines(&axes, &series)? {
            results
                .figure(&svg, "Hit ratio (%) against cache size, one line per trace and policy.");
        }
    }
    let mut sections = vec![results];
    let failures = dir.join("failures.csv");
    if let Ok(mut r) = csv::Reader::from_path(&failures) {
        let header: Vec<String> =
            r.headers().map(|h| h.iter().map(str::to_string).collect()).unwrap_or_default();
        let rows: Vec<Vec<String>> = r
            .records()
            .filter_map(Result::ok)
            .map(|x| x.iter().map(str::to_string).collect())
            .collect();
        if !rows.is_empty() {
            let mut sec = Section::new("Sweep: failed cells");
            sec.table(&header.iter().map(String::as_str).collect::<Vec<_>>(), &rows);
            sections.push(sec);
        }
    }
    Ok(sections)
}
