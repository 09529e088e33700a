//! `ember sievestore --out DIR` in a report: accesses captured and allocation-writes per day
//! for every configuration (SieveStore Figures 5 and 6), beside the paper's section 5.1.

use serde_json::Value;

use super::chart::{self, Axes, Series};
use super::page::{configuration, f, num, s, Section};
use super::papers;

/// One configuration's days.
struct Row {
    label: String,
    days: Vec<Value>,
}

/// % of a day's accesses that hit.
fn day_captured(day: &Value) -> f64 {
    let a = f(day, "accesses");
    if a > 0.0 {
        100.0 * (f(day, "read_hits") + f(day, "write_hits")) / a
    } else {
        0.0
    }
}

impl Row {
    /// Mean % of accesses captured over days 2+ (SieveStore-D bootstraps on day 1).
    fn captured_after_first(&self) -> f64 {
        let rest: Vec<f64> = self.days.iter().skip(1).map(day_captured).collect();
        if rest.is_empty() {
            self.days.first().map(day_captured).unwrap_or(0.0)
        } else {
            rest.iter().sum::<f64>() / rest.len() as f64
        }
    }

    fn allocation_writes(&self) -> f64 {
        self.days.iter().map(|d| f(d, "allocation_writes")).sum()
    }
}

/// The sections of a `sievestore.json`.
pub fn sections(doc: &Value) -> anyhow::Result<Vec<Section>> {
    let rows: Vec<Row> = doc
        .get("rows")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .map(|r| Row {
                    label: s(r, "label"),
                    days: r
                        .pointer("/run/days")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut config = Section::new("SieveStore: configuration");
    config.table(&["parameter", "value"], &configuration(doc, &["rows"]));
    let days = rows.iter().map(|r| r.days.len()).max().unwrap_or(0);
    let mut header: Vec<String> = vec!["configuration".into()];
    header.extend((1..=days).map(|d| format!("day {d}")));
    let mut captured = Section::new("SieveStore: accesses captured (Figure 5)");
    let mut h1 = header.clone();
    h1.push("mean, days 2+".into());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![r.label.clone()];
            row.extend(r.days.iter().map(|d| num(day_captured(d))));
            row.push(num(r.captured_after_first()));
            row
        })
        .collect();
    captured.table(&h1.iter().map(String::as_str).collect::<Vec<_>>(), &table);
    let shown: Vec<&Row> = rows.iter().filter(|r| !r.label.contains('/')).collect();
    let series: Vec<Series> = shown
        .iter()
        .map(|r| Series {
            name: r.label.clone(),
            points: r.days.iter().enumerate().map(|(i, d)| (i as f64, day_captured(d))).collect(),
        })
        .collect();
    let axes = Axes {
        title: "Accesses captured per day".into(),
        x: "day".into(),
        y: "accesses captured (%)".into(),
        log_x: false,
        categories: (1..=days).map(|d| format!("day {d}")).collect(),
    };
    if let Some(svg) = chart::lines(&axes, &series)? {
        captured.figure(&svg, "Accesses captured (% of the day's accesses), per configuration.");
    }
    let mut writes = Section::new("SieveStore: allocation-writes (Figure 6)");
    let mut h2 = header;
    h2.push("total".into());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![r.label.clone()];
            row.extend(r.days.iter().map(|d| num(f(d, "allocation_writes"))));
            row.push(num(r.allocation_writes()));
            row
        })
        .collect();
    writes.table(&h2.iter().map(String::as_str).collect::<Vec<_>>(), &table);
    let totals: Vec<f64> = shown.iter().map(|r| r.allocation_writes().max(1.0).log10()).collect();
    let axes = Axes {
        title: "Allocation-writes over the trace".into(),
        x: "configuration".into(),
        y: "log10(allocation-writes)".into(),
        log_x: false,
        categories: shown.iter().map(|r| r.label.clone()).collect(),
    };
    if let Some(svg) = chart::bars(&axes, &totals)? {
        writes.figure(
            &svg,
            "Allocation-writes (blocks written into the cache), log10, per configuration.",
        );
    }
    let mut sections = vec![config, captured, writes];
    if let Some(p) = paper(&rows) {
        sections.push(p);
    }
    Ok(sections)
}

/// Section 5.1's findings beside ember's, when the run has the configurations they compare.
fn paper(rows: &[Row]) -> Option<Section> {
    let get = |l: &str| rows.iter().find(|r| r.label == l);
    let (ideal, d, c) = (get("ideal")?, get("sievestore-d")?, get("sievestore-c")?);
    let (aod, wmna) = (get("aod")?, get("wmna")?);
    let unsieved = aod.captured_after_first().max(wmna.captured_after_first());
    let sieve_writes = d.allocation_writes().max(c.allocation_writes()).max(1.0);
    let unsieved_writes = aod.allocation_writes().min(wmna.allocation_writes());
    let ours = [
        format!(
            "{} %",
            num(100.0 * (1.0 - d.captured_after_first() / ideal.captured_after_first()))
        ),
        format!(
            "{} %",
            num(100.0 * (1.0 - c.captured_after_first() / ideal.captured_after_first()))
        ),
        format!("{:+.1} %", 100.0 * (d.captured_after_first() / unsieved - 1.0)),
        format!("{:+.1} %", 100.0 * (c.captured_after_first() / unsieved - 1.0)),
        format!("{}x", num(unsieved_writes / sieve_writes)),
        match (get("randsieve-c"), get("randsieve-blkd")) {
            (Some(a), Some(b)) => {
                format!(
                    "{}x",
                    num((a.allocation_writes() + b.allocation_writes()) / 2.0 / sieve_writes)
                )
            }
            _ => "-".into(),
        },
    ];
    let table: Vec<Vec<String>> = papers::SIEVESTORE_5_1
        .iter()
        .zip(ours)
        .map(|((what, paper), ember)| vec![what.to_string(), ember, paper.to_string()])
        .collect();
    let mut sec = Section::new("SieveStore: the paper's findings beside ember's");
    sec.text(&format!(
        "{}: the published findings on the paper's eight-day ensemble, beside the same \
         quantities computed from this run.",
        papers::SIEVESTORE
    ));
    sec.table(&["finding", "ember", "paper"], &table);
    Some(sec)
}
