//! What a replay measured: throughput and latency percentiles per op, what verification
//! checked and found, how the trace was mapped, and the server's hit ratio over time.

use std::fmt;

use serde::Serialize;

use crate::plan::{ExportTarget, PlanStats};

/// Latency percentiles in microseconds (exact, from every request's latency).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
}

impl LatencySummary {
    /// Summarize latencies given in nanoseconds (sorted in place).
    pub fn from_ns(latencies: &mut [u64]) -> LatencySummary {
        if latencies.is_empty() {
            return LatencySummary::default();
        }
        latencies.sort_unstable();
        let n = latencies.len();
        let at = |q: f64| {
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
            latencies[rank - 1] as f64 / 1e3
        };
        let sum: u128 = latencies.iter().map(|&l| u128::from(l)).sum();
        LatencySummary {
            mean_us: sum as f64 / n as f64 / 1e3,
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: latencies[n - 1] as f64 / 1e3,
        }
    }
}

/// Throughput and latency of one op.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpReport {
    /// `read` or `write`.
    pub op: String,
    /// Requests completed (including failed ones).
    pub count: u64,
    /// Requests the server answered with an error.
    pub errors: u64,
    /// Bytes moved by successful requests.
    pub bytes: u64,
    /// Requests per second over the replay's wall time.
    pub iops: f64,
    /// Megabytes (10^6 bytes) per second over the replay's wall time.
    pub mb_per_s: f64,
    /// Latency, from sending the request to its reply.
    pub latency: LatencySummary,
}

/// One failed check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Index of the request in the trace.
    pub request: u64,
    /// Export name.
    pub export: String,
    /// Byte offset of the first bad sector.
    pub offset: u64,
    /// The generation expected there (0: prefill).
    pub expected_generation: u32,
    /// What was found instead.
    pub found: String,
}

/// What verification checked and found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Reads whose every sector had a known expected content and matched it.
    pub reads_verified: u64,
    /// Reads with some sectors of unknown content (never written by this replay), whose
    /// known sectors matched.
    pub reads_partly_verified: u64,
    /// Reads none of whose sectors had a known content.
    pub reads_unverifiable: u64,
    /// Reads with at least one sector that did not match.
    pub reads_failed: u64,
    /// Sectors compared.
    pub sectors_checked: u64,
    /// Sectors read whose content was unknown.
    pub sectors_unknown: u64,
    /// Sectors that did not match.
    pub sectors_failed: u64,
    /// The first failures (at most 20), for diagnosis.
    pub first_failures: Vec<Failure>,
}

/// What the prefill wrote.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PrefillReport {
    /// Bytes written.
    pub bytes: u64,
    /// Contiguous ranges written.
    pub extents: u64,
    /// Wall time.
    pub seconds: f64,
}

/// One scrape of the server's metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HitSample {
    /// Seconds since the replay started.
    pub t_s: f64,
    /// Read hits (blocks) counted by the server since the previous sample.
    pub hits: u64,
    /// Read misses (blocks) since the previous sample.
    pub misses: u64,
    /// hits / (hits + misses) in this interval (0 if no reads).
    pub hit_ratio: f64,
}

/// What the server's metrics said during the replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerReport {
    /// The metrics URL scraped.
    pub url: String,
    /// Read hits (blocks) during the replay (prefill excluded).
    pub hits: u64,
    /// Read misses (blocks) during the replay.
    pub misses: u64,
    /// hits / (hits + misses) over the replay.
    pub hit_ratio: f64,
    /// Per scrape interval.
    pub timeline: Vec<HitSample>,
}

/// Everything a replay measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// The server address.
    pub server: String,
    /// Exports replayed onto.
    pub exports: Vec<ExportTarget>,
    /// Trace volume → export name.
    pub mapping: Vec<(String, String)>,
    /// How planning changed the trace.
    pub plan: PlanStats,
    /// `fast`, or `trace` with the speed factor.
    pub timing: String,
    /// Requests in flight at most.
    pub queue_depth: usize,
    /// Connections per export.
    pub connections: usize,
    /// The pattern seed.
    pub seed: u64,
    /// Requests sent after their due time (trace timing only).
    pub behind_schedule: u64,
    /// Largest delay past a due time, in milliseconds.
    pub max_lateness_ms: f64,
    /// Wall time of the replay (prefill excluded).
    pub seconds: f64,
    /// Requests per second over all ops.
    pub iops: f64,
    /// Megabytes per second over all ops.
    pub mb_per_s: f64,
    /// Per op: `read`, `write`.
    pub ops: Vec<OpReport>,
    /// Verification.
    pub verification: Verification,
    /// The prefill, if one ran.
    pub prefill: Option<PrefillReport>,
    /// The server's hit ratio, if its metrics were scraped.
    pub server_metrics: Option<ServerReport>,
}

impl Report {
    /// True if any request failed or any read did not verify.
    pub fn failed(&self) -> bool {
        self.verification.reads_failed > 0 || self.ops.iter().any(|o| o.errors > 0)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "server      {}", self.server)?;
        for (volume, export) in &self.mapping {
            writeln!(f, "volume      {volume} -> export {export}")?;
        }
        let p = &self.plan;
        writeln!(
            f,
            "requests    {} planned of {} ({} wrapped modulo the export size, {} widened to 512-byte sectors, {} clipped, {} unmapped, {} empty)",
            p.planned, p.requests, p.wrapped, p.realigned, p.clipped, p.skipped_unmapped, p.skipped_empty
        )?;
        writeln!(
            f,
            "replay      timing {}, queue depth {}, {} connection(s) per export, seed {:#x}",
            self.timing, self.queue_depth, self.connections, self.seed
        )?;
        if let Some(pf) = &self.prefill {
            writeln!(
                f,
                "prefill     {:.1} MiB in {} extents, {:.2} s",
                pf.bytes as f64 / 1048576.0,
                pf.extents,
                pf.seconds
            )?;
        }
        if self.timing != "fast" {
            writeln!(
                f,
                "schedule    {} requests sent late, at most {:.1} ms",
                self.behind_schedule, self.max_lateness_ms
            )?;
        }
        writeln!(
            f,
            "total       {:.3} s, {:.0} IOPS, {:.2} MB/s",
            self.seconds, self.iops, self.mb_per_s
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "{:<6} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
            "op",
            "count",
            "errors",
            "IOPS",
            "MB/s",
            "mean µs",
            "p50 µs",
            "p90 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs"
        )?;
        for o in &self.ops {
            let l = &o.latency;
            writeln!(
                f,
                "{:<6} {:>9} {:>7} {:>10.0} {:>9.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>10.1}",
                o.op, o.count, o.errors, o.iops, o.mb_per_s, l.mean_us, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
            )?;
        }
        writeln!(f)?;
        let v = &self.verification;
        writeln!(
            f,
            "verified    {} reads fully, {} partly, {} unverifiable (content never written by this replay; use --prefill), {} FAILED",
            v.reads_verified, v.reads_partly_verified, v.reads_unverifiable, v.reads_failed
        )?;
        writeln!(
            f,
            "sectors     {} checked, {} unknown, {} mismatched",
            v.sectors_checked, v.sectors_unknown, v.sectors_failed
        )?;
        for x in &v.first_failures {
            writeln!(
                f,
                "  FAILED    request {} export {} offset {}: expected generation {}, found {}",
                x.request, x.export, x.offset, x.expected_generation, x.found
            )?;
        }
        if let Some(s) = &self.server_metrics {
            writeln!(f)?;
            writeln!(
                f,
                "server hit ratio {:.2}% ({} hits, {} misses, blocks) from {}",
                100.0 * s.hit_ratio,
                s.hits,
                s.misses,
                s.url
            )?;
            writeln!(f, "{:>8} {:>10} {:>10} {:>9}", "t s", "hits", "misses", "hit %")?;
            for h in &s.timeline {
                writeln!(
                    f,
                    "{:>8.1} {:>10} {:>10} {:>8.2}%",
                    h.t_s,
                    h.hits,
                    h.misses,
                    100.0 * h.hit_ratio
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_exact_ranks() {
        let mut l: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        l.reverse();
        let s = LatencySummary::from_ns(&mut l);
        assert_eq!(s.p50_us, 500.0);
        assert_eq!(s.p90_us, 900.0);
        assert_eq!(s.p99_us, 990.0);
        assert_eq!(s.p999_us, 999.0);
        assert_eq!(s.max_us, 1000.0);
        assert_eq!(s.mean_us, 500.5);
        assert_eq!(LatencySummary::from_ns(&mut []), LatencySummary::default());
    }

    #[test]
    fn failures_fail_the_report() {
        let mut r = Report::default();
        assert!(!r.failed());
        r.verification.reads_failed = 1;
        assert!(r.failed());
        let text = r.to_string();
        assert!(text.contains("1 FAILED"), "{text}");
    }
}
