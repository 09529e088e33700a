//! `ember stats --metrics ADDR`: fetch a running `ember serve`'s Prometheus metrics and print
//! them as readable tables (engine counters per volume, NBD commands with latency), or JSON.

use std::collections::BTreeMap;

use anyhow::Context;
use clap::Args;
use ember_replay::scrape::{MetricsUrl, Sample};
use serde::Serialize;

/// Options of `ember stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The server's metrics address: HOST:PORT or http://HOST:PORT/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: String,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// One NBD command's numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CommandRow {
    /// Requests answered.
    pub count: u64,
    /// Error replies.
    pub errors: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Mean latency in µs.
    pub mean_us: f64,
    /// Upper bound of the bucket holding the median, µs.
    pub p50_us: Option<f64>,
    /// Upper bound of the bucket holding the 99th percentile, µs.
    pub p99_us: Option<f64>,
}

/// Everything `ember stats` shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerView {
    /// Cache gauges (block size, capacity, resident blocks, hit ratio).
    pub cache: BTreeMap<String, f64>,
    /// Engine counters: volume → counter → value.
    pub volumes: BTreeMap<String, BTreeMap<String, u64>>,
    /// The cache device's counters (no volume label: the io_uring's reads and hand-offs).
    pub device: BTreeMap<String, u64>,
    /// NBD commands that were used.
    pub nbd: BTreeMap<String, CommandRow>,
    /// NBD connections: opened, open.
    pub connections: BTreeMap<String, u64>,
    /// Bonfire's warmup (the `ember_warmup_*` metrics without prefix and `_total`).
    pub warmup: BTreeMap<String, f64>,
}

fn quantile_from_buckets(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = (q * total).ceil().max(1.0);
    buckets.iter().find(|(_, c)| *c >= rank).map(|(le, _)| le * 1e6).filter(|v| v.is_finite())
}

/// Build the view from parsed samples.
pub fn view(samples: &[Sample]) -> ServerView {
    let mut v = ServerView::default();
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for s in samples {
        if let Some(w) = s.name.strip_prefix("ember_warmup_") {
            v.warmup.insert(w.trim_end_matches("_total").to_string(), s.value);
        } else if let Some(counter) =
            s.name.strip_prefix("ember_cache_").and_then(|n| n.strip_suffix("_total"))
        {
            match s.label("volume") {
                Some(volume) => v
                    .volumes
                    .entry(volume.to_string())
                    .or_default()
                    .insert(counter.to_string(), s.value as u64),
                None => v.device.insert(counter.to_string(), s.value as u64),
            };
        } else if let Some(g) = s.name.strip_prefix("ember_cache_") {
            v.cache.insert(g.to_string(), s.value);
        } else if let Some(command) = s.label("command") {
            let command = command.to_string();
            match s.name.as_str() {
                "ember_nbd_requests_total" => {
                    v.nbd.entry(command).or_default().count = s.value as u64
                }
                "ember_nbd_errors_total" => {
                    v.nbd.entry(command).or_default().errors = s.value as u64
                }
                "ember_nbd_bytes_total" => v.nbd.entry(command).or_default().bytes = s.value as u64,
                "ember_nbd_request_duration_seconds_bucket" => {
                    let le = match s.label("le") {
                        Some("+Inf") => f64::INFINITY,
                        Some(x) => x.parse().unwrap_or(f64::INFINITY),
                        None => f64::INFINITY,
                    };
                    buckets.entry(command).or_default().push((le, s.value));
                }
                "ember_nbd_request_duration_seconds_sum" => {
                    sums.insert(command, s.value);
                }
                _ => {}
            }
        } else if let Some(c) = s.name.strip_prefix("ember_nbd_connections_") {
            v.connections.insert(c.trim_end_matches("_total").to_string(), s.value as u64);
        }
    }
    for (command, row) in v.nbd.iter_mut() {
        if let Some(b) = buckets.get_mut(command) {
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
            row.p50_us = quantile_from_buckets(b, 0.5);
            row.p99_us = quantile_from_buckets(b, 0.99);
        }
        if row.count > 0 {
            row.mean_us = sums.get(command).copied().unwrap_or(0.0) * 1e6 / row.count as f64;
        }
    }
    v.nbd.retain(|_, r| r.count > 0);
    v
}

/// Render the view as tables.
pub fn table(v: &ServerView) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let g = |k: &str| v.cache.get(k).copied().unwrap_or(0.0);
    let _ = writeln!(
        out,
        "cache: {} blocks of {} bytes, {} resident ({:.1}%), read hit ratio {:.2}%",
        g("capacity_blocks"),
        g("block_size_bytes"),
        g("resident_blocks"),
        if g("capacity_blocks") > 0.0 {
            100.0 * g("resident_blocks") / g("capacity_blocks")
        } else {
            0.0
        },
        100.0 * g("read_hit_ratio")
    );
    let names: Vec<&String> = v.volumes.keys().collect();
    if !names.is_empty() {
        let _ = writeln!(out);
        let _ = write!(out, "{:<22}", "counter");
        for n in &names {
            let _ = write!(out, " {:>16}", n);
        }
        let _ = writeln!(out);
        let mut hit_row = format!("{:<22}", "read hit ratio");
        for n in &names {
            let c = &v.volumes[*n];
            let (h, m) = (
                c.get("read_hits").copied().unwrap_or(0),
                c.get("read_misses").copied().unwrap_or(0),
            );
            let r = if h + m > 0 {
                format!("{:.2}%", 100.0 * h as f64 / (h + m) as f64)
            } else {
                "-".into()
            };
            let _ = write!(hit_row, " {r:>16}");
        }
        let _ = writeln!(out, "{hit_row}");
        let counters: std::collections::BTreeSet<&String> =
            v.volumes.values().flat_map(|c| c.keys()).collect();
        for c in counters {
            let _ = write!(out, "{c:<22}");
            for n in &names {
                let _ = write!(out, " {:>16}", v.volumes[*n].get(c).copied().unwrap_or(0));
            }
            let _ = writeln!(out);
        }
    }
    if !v.device.is_empty() {
        let pairs: Vec<String> = v.device.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(out, "\ncache device: {}", pairs.join(", "));
    }
    if !v.nbd.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<13} {:>10} {:>7} {:>14} {:>10} {:>10} {:>10}",
            "nbd command", "count", "errors", "bytes", "mean µs", "p50 ≤ µs", "p99 ≤ µs"
        );
        let opt = |x: Option<f64>| x.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
        for (c, r) in &v.nbd {
            let _ = writeln!(
                out,
                "{c:<13} {:>10} {:>7} {:>14} {:>10.1} {:>10} {:>10}",
                r.count,
                r.errors,
                r.bytes,
                r.mean_us,
                opt(r.p50_us),
                opt(r.p99_us)
            );
        }
    }
    let w = |k: &str| v.warmup.get(k).copied().unwrap_or(0.0);
    if w("state") > 0.0 {
        let state = match w("state") as u8 {
            1 => "monitoring",
            2 => "preloading",
            _ => "preload done",
        };
        let _ = writeln!(
            out,
            "\nwarmup: {state}; preloaded {} of {} planned blocks ({} bytes, {} already cached) \
             in {:.2} s; log {} bytes written, {} requests staged, {} dropped, staging {} bytes",
            w("preloaded_blocks"),
            w("preload_planned_blocks"),
            w("preloaded_bytes"),
            w("preload_skipped_blocks"),
            w("preload_seconds"),
            w("log_bytes_written"),
            w("staged_requests"),
            w("staging_dropped"),
            w("staging_bytes")
        );
        let _ = writeln!(
            out,
            "warmup: {} hits on preloaded blocks (first hit per block); preloaded {} from the \
             snapshot, {} from backing; snapshot {} bytes written, {} blocks copied, {} bad \
             at preload",
            w("preloaded_hits"),
            w("preloaded_from_snapshot_blocks"),
            w("preloaded_from_backing_blocks"),
            w("snapshot_bytes_written"),
            w("snapshot_copied_blocks"),
            w("snapshot_bad_blocks")
        );
    }
    if !v.connections.is_empty() {
        let _ = writeln!(
            out,
            "\nconnections: {} opened, {} open",
            v.connections.get("opened").copied().unwrap_or(0),
            v.connections.get("open").copied().unwrap_or(0)
        );
    }
    out
}

/// Run `ember stats`.
pub fn run(args: StatsArgs) -> anyhow::Result<()> {
    let url = MetricsUrl::parse(&args.metrics)?;
    let samples = url.scrape().with_context(|| format!("reading metrics from {url}"))?;
    let v = view(&samples);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", table(&v));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_replay::scrape::parse;

    #[test]
    fn view_collects_volumes_commands_and_quantiles() {
        let text = "\
ember_cache_capacity_blocks 100
ember_cache_read_hit_ratio 0.75
ember_cache_read_hits_total{volume=\"a\"} 3
ember_cache_read_misses_total{volume=\"a\"} 1
ember_nbd_requests_total{command=\"read\"} 4
ember_nbd_requests_total{command=\"trim\"} 0
ember_nbd_bytes_total{command=\"read\"} 16384
ember_nbd_request_duration_seconds_bucket{command=\"read\",le=\"0.000001\"} 0
ember_nbd_request_duration_seconds_bucket{command=\"read\",le=\"0.000002\"} 3
ember_nbd_request_duration_seconds_bucket{command=\"read\",le=\"0.000004\"} 4
ember_nbd_request_duration_seconds_bucket{command=\"read\",le=\"+Inf\"} 4
ember_nbd_request_duration_seconds_sum{command=\"read\"} 0.000008
ember_nbd_connections_opened_total 2
ember_warmup_state 2
ember_warmup_preloaded_blocks_total 40
ember_warmup_preload_planned_blocks 100
ember_warmup_log_bytes_written_total 3200
ember_warmup_preloaded_hits_total 31
ember_warmup_preloaded_from_snapshot_blocks_total 25
";
        let samples = match parse(text) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let v = view(&samples);
        assert_eq!(v.volumes["a"]["read_hits"], 3);
        assert_eq!(v.cache["read_hit_ratio"], 0.75);
        assert_eq!(v.nbd.len(), 1, "unused commands are left out");
        let r = &v.nbd["read"];
        assert_eq!((r.count, r.bytes), (4, 16384));
        assert_eq!(r.p50_us, Some(2.0));
        assert_eq!(r.p99_us, Some(4.0));
        assert!((r.mean_us - 2.0).abs() < 1e-9);
        assert_eq!(v.connections["opened"], 2);
        let t = table(&v);
        assert!(t.contains("75.00%"), "{t}");
        assert!(t.contains("read_hits"), "{t}");
        assert_eq!(v.warmup["preloaded_blocks"], 40.0);
        assert!(t.contains("warmup: preloading; preloaded 40 of 100 planned blocks"), "{t}");
        assert!(t.contains("log 3200 bytes written"), "{t}");
        assert_eq!(v.warmup["preloaded_hits"], 31.0);
        assert!(t.contains("warmup: 31 hits on preloaded blocks"), "{t}");
        assert!(t.contains("preloaded 25 from the snapshot"), "{t}");
    }

    /// Cache-device counters carry no volume label (the io_uring's reads and hand-offs):
    /// they are the device's, not a volume's, and every volume's counters are rows.
    #[test]
    fn device_counters_do_not_hide_the_volumes_counters() {
        let text = "\
ember_cache_device_ring_reads_total 7
ember_cache_device_ring_handoffs_total 2
ember_cache_read_hits_total{volume=\"a\"} 3
ember_cache_read_misses_total{volume=\"a\"} 1
ember_cache_writes_total{volume=\"b\"} 5
";
        let samples = match parse(text) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let v = view(&samples);
        assert_eq!(v.volumes.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(v.device["device_ring_reads"], 7);
        let t = table(&v);
        let row = |name: &str| t.lines().find(|l| l.starts_with(name)).map(str::to_string);
        let hits = row("read_hits ").unwrap_or_else(|| panic!("no read_hits row:\n{t}"));
        assert!(hits.split_whitespace().eq(["read_hits", "3", "0"]), "{t}");
        let writes = row("writes ").unwrap_or_else(|| panic!("no writes row:\n{t}"));
        assert!(writes.split_whitespace().eq(["writes", "0", "5"]), "{t}");
        assert!(t.contains("cache device: device_ring_handoffs 2, device_ring_reads 7"), "{t}");
    }
}
