//! Output handling shared by the experiment commands (`--out`, `--json`, `--quiet`, defined
//! once in [`OutputArgs`]), and what `ember sim` writes: an aligned table, JSON, CSV and a
//! timeline CSV. Column names are stable and documented in docs/reference/outputs.md.

use anyhow::Context;
use clap::Args;
use ember_sim::{IntervalStats, SimResult};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where an experiment command writes its results, and how much it says: the same flags on
/// `ember sim`, `ember sievestore`, `ember demote`, `ember analyze` and `ember warmup run`.
#[derive(Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write every result file (JSON, CSV, tables, PNG figures) into this directory, unless
    /// a flag names another file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress bar, no tables, no timing lines.
    #[arg(long, short)]
    pub quiet: bool,
}

impl OutputArgs {
    /// Create the output directory, if one was asked for, and return it.
    pub fn dir(&self) -> anyhow::Result<Option<&Path>> {
        match &self.out {
            Some(d) => {
                ensure_dir(d)?;
                Ok(Some(d.as_path()))
            }
            None => Ok(None),
        }
    }

    /// The file given by a flag, or `name` inside the output directory, or none.
    pub fn file(&self, flag: Option<&PathBuf>, name: &str) -> Option<PathBuf> {
        flag.cloned().or_else(|| self.out.as_ref().map(|d| d.join(name)))
    }

    /// The JSON file: `--json`, or `name` inside `--out`.
    pub fn json_file(&self, name: &str) -> Option<PathBuf> {
        self.file(self.json.as_ref(), name)
    }
}

/// Create `dir` and its parents.
pub fn ensure_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

/// Write `text` to `path`, naming the path in the error.
pub fn write_text(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A file name's last component, for titles (`/a/b/web_0.csv` -> `web_0.csv`).
pub fn display_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// One row of a sim report: a run plus how its size was asked for.
#[derive(Clone, Debug)]
pub struct Row {
    /// The size as given on the command line (`1%`, `64MiB`, `1000`).
    pub size: String,
    /// The run's outcome.
    pub result: SimResult,
}

/// A whole sim report: the trace's figures and every run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The trace file.
    pub trace: String,
    /// Cache block size in bytes.
    pub block_size: u64,
    /// Requests touching at least one block.
    pub requests: u64,
    /// Block accesses.
    pub block_accesses: u64,
    /// Working-set size in blocks (distinct blocks).
    pub wss_blocks: u64,
    /// The timeline interval, if any (`1h`, `100000req`).
    pub interval: Option<String>,
    /// The uncounted warm-up period, if there was one.
    pub warmup: Option<WarmupNote>,
    /// The spatial sample of miniature simulations (MINISIM), if the runs were those: each
    /// row's counters are then the sample's, its miss ratio the estimate for its full size.
    pub minisim: Option<MiniSimNote>,
    /// The runs, in grid order (policy-major).
    pub rows: Vec<Row>,
}

/// What the uncounted warm-up period of a report covered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WarmupNote {
    /// The period as asked for (`1000 requests`, `1h`).
    pub period: String,
    /// Requests in the warm-up (not counted).
    pub requests: u64,
    /// Block accesses in the warm-up (not counted).
    pub block_accesses: u64,
    /// Seconds from the first request to the first counted one; `None` if the trace ended
    /// within the warm-up (nothing was counted).
    pub counting_starts_s: Option<f64>,
}

impl WarmupNote {
    /// The note for `period` over a trace of `requests` requests and `accesses` block
    /// accesses, counting from `from` (`None`: the trace ended within the period). `None`
    /// without a period.
    pub fn of(
        period: ember_sim::WarmupPeriod,
        from: Option<ember_sim::CountStart>,
        requests: u64,
        accesses: u64,
    ) -> Option<Self> {
        if period.is_none() {
            return None;
        }
        Some(match from {
            Some(c) => WarmupNote {
                period: period.to_string(),
                requests: c.request,
                block_accesses: c.access,
                counting_starts_s: Some(c.start_ns as f64 / 1e9),
            },
            None => WarmupNote {
                period: period.to_string(),
                requests,
                block_accesses: accesses,
                counting_starts_s: None,
            },
        })
    }

    /// One line for a table's header.
    pub fn line(&self) -> String {
        let when = match self.counting_starts_s {
            Some(s) => format!("counting starts {s:.3} s after the first request"),
            None => "the trace ended within it: nothing counted".to_string(),
        };
        format!(
            "uncounted warm-up period ({}): {} requests, {} block accesses; {when}\n",
            self.period, self.requests, self.block_accesses
        )
    }
}

/// The spatial sample of miniature simulations (MINISIM) behind a report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MiniSimNote {
    /// The sampling rate (a fraction of the blocks).
    pub rate: f64,
    /// Block accesses in the sample.
    pub sampled_accesses: u64,
    /// Distinct blocks in the sample.
    pub sampled_blocks: u64,
}

impl MiniSimNote {
    /// One line for a table's header.
    pub fn line(&self) -> String {
        format!(
            "miniature simulations (MINISIM) at sampling rate {}: {} sampled block accesses over \
             {} blocks; each size is scaled by the rate; counters are the sample's (SHARDS-adj)\n",
            self.rate, self.sampled_accesses, self.sampled_blocks
        )
    }
}

/// A run as JSON / CSV writes it.
#[derive(Serialize)]
struct RowOut<'a> {
    policy: &'a str,
    admission: &'a str,
    size: &'a str,
    capacity_blocks: u64,
    capacity_bytes: u64,
    percent_wss: f64,
    requests: u64,
    block_accesses: u64,
    reads: u64,
    writes: u64,
    hits: u64,
    read_hits: u64,
    write_hits: u64,
    misses: u64,
    read_misses: u64,
    write_misses: u64,
    hit_ratio: f64,
    read_hit_ratio: f64,
    allocation_writes: u64,
    evictions: u64,
}

/// A timeline interval as JSON / CSV writes it.
#[derive(Serialize)]
struct IntervalOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity_blocks: Option<u64>,
    interval: u64,
    start_s: f64,
    start_request: u64,
    requests: u64,
    block_accesses: u64,
    reads: u64,
    writes: u64,
    read_hits: u64,
    write_hits: u64,
    misses: u64,
    hit_ratio: f64,
    allocation_writes: u64,
    evictions: u64,
    /// True for an interval of the uncounted warm-up period (not in the run's totals).
    warmup: bool,
}

impl Report {
    /// `capacity` as a percentage of the working set.
    pub fn percent_wss(&self, capacity_blocks: u64) -> f64 {
        if self.wss_blocks == 0 {
            0.0
        } else {
            100.0 * capacity_blocks as f64 / self.wss_blocks as f64
        }
    }

    fn row_out<'a>(&self, r: &'a Row) -> RowOut<'a> {
        let c = &r.result.totals;
        RowOut {
            policy: &r.result.policy,
            admission: &r.result.admission,
            size: &r.size,
            capacity_blocks: r.result.capacity_blocks,
            capacity_bytes: r.result.capacity_blocks.saturating_mul(self.block_size),
            percent_wss: self.percent_wss(r.result.capacity_blocks),
            requests: c.requests,
            block_accesses: c.block_accesses,
            reads: c.reads,
            writes: c.writes,
            hits: c.hits(),
            read_hits: c.read_hits,
            write_hits: c.write_hits,
            misses: c.misses(),
            read_misses: c.read_misses,
            write_misses: c.write_misses,
            hit_ratio: c.hit_ratio(),
            read_hit_ratio: c.read_hit_ratio(),
            allocation_writes: c.allocation_writes,
            evictions: c.evictions,
        }
    }

    /// The report as aligned text: one line per run.
    pub fn table(&self) -> String {
        let head = [
            "policy",
            "size",
            "blocks",
            "% WSS",
            "read hits",
            "write hits",
            "misses",
            "hit ratio",
            "alloc-writes",
            "evictions",
        ];
        let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
        for r in &self.rows {
            let c = &r.result.totals;
            rows.push(vec![
                r.result.policy.clone(),
                r.size.clone(),
                r.result.capacity_blocks.to_string(),
                format!("{:.2}", self.percent_wss(r.result.capacity_blocks)),
                c.read_hits.to_string(),
                c.write_hits.to_string(),
                c.misses().to_string(),
                format!("{:.4}", c.hit_ratio()),
                c.allocation_writes.to_string(),
                c.evictions.to_string(),
            ]);
        }
        let widths: Vec<usize> =
            (0..head.len()).map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
        let mut out = format!(
            "trace {}: {} requests, {} block accesses of {} B, working set {} blocks\n",
            self.trace, self.requests, self.block_accesses, self.block_size, self.wss_blocks
        );
        if let Some(w) = &self.warmup {
            out.push_str(&w.line());
        }
        if let Some(m) = &self.minisim {
            out.push_str(&m.line());
        }
        for r in &rows {
            let cells: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if i < 2 {
                        format!("{s:<w$}", w = widths[i])
                    } else {
                        format!("{s:>w$}", w = widths[i])
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }

    fn interval_out<'a>(&self, r: &'a Row, i: &IntervalStats, with_run: bool) -> IntervalOut<'a> {
        let c = &i.counters;
        IntervalOut {
            policy: with_run.then_some(r.result.policy.as_str()),
            size: with_run.then_some(r.size.as_str()),
            capacity_blocks: with_run.then_some(r.result.capacity_blocks),
            interval: i.index,
            start_s: i.start_ns as f64 / 1e9,
            start_request: i.start_request,
            requests: c.requests,
            block_accesses: c.block_accesses,
            reads: c.reads,
            writes: c.writes,
            read_hits: c.read_hits,
            write_hits: c.write_hits,
            misses: c.misses(),
            hit_ratio: c.hit_ratio(),
            allocation_writes: c.allocation_writes,
            evictions: c.evictions,
            warmup: i.warmup,
        }
    }

    /// The report as a JSON document.
    pub fn json(&self) -> serde_json::Value {
        let runs: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(self.row_out(r)).unwrap_or_default();
                if let (Some(n), Some(obj)) = (r.result.seq_cutoff_bypasses, v.as_object_mut()) {
                    obj.insert("seq_cutoff_bypasses".into(), n.into());
                }
                if let (Some(tl), Some(obj)) = (&r.result.timeline, v.as_object_mut()) {
                    let t: Vec<IntervalOut> =
                        tl.iter().map(|i| self.interval_out(r, i, false)).collect();
                    obj.insert("timeline".into(), serde_json::to_value(t).unwrap_or_default());
                }
                v
            })
            .collect();
        serde_json::json!({
            "trace": self.trace,
            "block_size": self.block_size,
            "requests": self.requests,
            "block_accesses": self.block_accesses,
            "wss_blocks": self.wss_blocks,
            "wss_bytes": self.wss_blocks.saturating_mul(self.block_size),
            "interval": self.interval,
            "warmup": self.warmup,
            "minisim": self.minisim,
            "runs": runs,
        })
    }

    /// Write the JSON document to `path`.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(&self.json())?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }

    /// Write one CSV line per run to `path`.
    pub fn write_csv(&self, path: &Path) -> anyhow::Result<()> {
        let text = self.csv_text()?;
        write_text(path, &text)
    }

    /// One CSV line per run, with a header line: what `--csv` writes.
    pub fn csv_text(&self) -> anyhow::Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &self.rows {
            w.serialize(self.row_out(r)).context("encoding CSV")?;
        }
        let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("encoding CSV: {e}"))?;
        String::from_utf8(bytes).context("encoding CSV")
    }

    /// Write one CSV line per (run, interval) to `path`.
    pub fn write_timeline_csv(&self, path: &Path) -> anyhow::Result<()> {
        let text = self.timeline_csv_text()?;
        write_text(path, &text)
    }

    /// One CSV line per (run, interval), with a header line: the timeline CSV.
    pub fn timeline_csv_text(&self) -> anyhow::Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &self.rows {
            for i in r.result.timeline.iter().flatten() {
                w.serialize(self.interval_out(r, i, true)).context("encoding CSV")?;
            }
        }
        let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("encoding CSV: {e}"))?;
        String::from_utf8(bytes).context("encoding CSV")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ember_sim::Counters;

    pub(crate) fn sample() -> Report {
        let c = |rh, wh, rm, wm| Counters {
            requests: 10,
            block_accesses: 10,
            reads: rh + rm,
            writes: wh + wm,
            read_hits: rh,
            write_hits: wh,
            read_misses: rm,
            write_misses: wm,
            allocation_writes: rm + wm,
            evictions: 1,
        };
        let half = |x: Counters| {
            let a = Counters { requests: 5, block_accesses: 5, ..x };
            let b = a;
            vec![
                IntervalStats {
                    index: 0,
                    start_ns: 0,
                    start_request: 0,
                    warmup: false,
                    counters: a,
                },
                IntervalStats {
                    index: 1,
                    start_ns: 3_600_000_000_000,
                    start_request: 5,
                    warmup: false,
                    counters: b,
                },
            ]
        };
        let run = |p: &str, cap, ct: Counters| SimResult {
            policy: p.into(),
            admission: "aod".into(),
            capacity_blocks: cap,
            totals: ct,
            timeline: Some(half(ct)),
            counted_from: None,
            seq_cutoff_bypasses: None,
        };
        Report {
            trace: "t.csv".into(),
            block_size: 4096,
            requests: 10,
            block_accesses: 10,
            wss_blocks: 200,
            interval: Some("1h".into()),
            warmup: None,
            minisim: None,
            rows: vec![
                Row { size: "1%".into(), result: run("lru", 2, c(3, 1, 4, 2)) },
                Row { size: "10%".into(), result: run("arc", 20, c(5, 2, 2, 1)) },
            ],
        }
    }

    #[test]
    fn table_is_aligned() {
        let t = sample().table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].starts_with("policy"));
        assert!(lines[2].starts_with("lru"));
        // Right-aligned numeric columns end at the same place on every line.
        assert_eq!(lines[1].len(), lines[2].len());
        assert_eq!(lines[2].len(), lines[3].len());
        assert!(lines[2].contains("0.4000"), "{}", lines[2]);
        assert!(lines[3].contains("10.00"), "{}", lines[3]);
    }

    #[test]
    fn json_and_csv_carry_the_counters() {
        let r = sample();
        let j = r.json();
        assert_eq!(j["wss_blocks"], 200);
        assert_eq!(j["runs"][1]["policy"], "arc");
        assert_eq!(j["runs"][1]["hits"], 7);
        assert_eq!(j["runs"][1]["misses"], 3);
        assert_eq!(j["runs"][1]["capacity_bytes"], 20 * 4096);
        assert_eq!(j["runs"][0]["hit_ratio"], 0.4);
        assert_eq!(j["runs"][0]["percent_wss"], 1.0);
        assert_eq!(j["runs"][0]["timeline"][1]["start_s"], 3600.0);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.csv");
        r.write_csv(&p).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "policy,admission,size,capacity_blocks,capacity_bytes,percent_wss,requests,block_accesses,reads,writes,hits,read_hits,write_hits,misses,read_misses,write_misses,hit_ratio,read_hit_ratio,allocation_writes,evictions"
        );
        assert_eq!(
            lines.next().unwrap(),
            "lru,aod,1%,2,8192,1.0,10,10,7,3,4,3,1,6,4,2,0.4,0.42857142857142855,6,1"
        );
        let p = dir.path().join("t.csv");
        r.write_timeline_csv(&p).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0]
            .starts_with("policy,size,capacity_blocks,interval,start_s,start_request,requests"));
        assert!(lines[4].starts_with("arc,10%,20,1,3600.0,5,5,5,"), "{}", lines[4]);
    }
}
