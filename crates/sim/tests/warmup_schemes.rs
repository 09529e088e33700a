//! Bonfire (FAST 2013) section 4.3 scheme behaviour and section 6.1's Zipf experiment, on
//! generated traces (the MSR-Cambridge traces are not available here).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_policy::warmup::SelectorKind;
use ember_sim::warmup::experiment::{run_warmup, SchemeMetrics, VolumeAccesses, WarmupConfig};
use ember_trace::gen::bonfire::{bonfire, BonfireConfig};
use ember_trace::gen::{Common, ZipfConfig};
use ember_trace::Trace;

fn metrics_of(trace: &Trace, cfg: &WarmupConfig, th_v: f64, th_n: f64) -> Vec<Vec<SchemeMetrics>> {
    let vols = VolumeAccesses::of_trace(trace, cfg.block_size);
    let t0 = trace.requests.iter().map(|r| r.time_ns).min().unwrap();
    run_warmup(&vols, t0, cfg).iter().map(|d| d.metrics(th_v, th_n, 100e6)).collect()
}

fn get<'a>(m: &'a [SchemeMetrics], s: &str) -> &'a SchemeMetrics {
    m.iter().find(|x| x.scheme == s).unwrap()
}

/// Section 4.3.3, Figure 6: "Last-K is the best algorithm in terms of convergence time" on
/// traces with "a significant amount of hourly reaccesses"; "all algorithms improve or are the
/// same as cold caches".
#[test]
fn bonfire_figure6_hourly_trace_last_k_converges_first_and_cold_last() {
    let t = bonfire(&BonfireConfig {
        days: 3.0,
        hourly: 0.8,
        hourly_mean_age_s: 1800.0,
        daily_regions: 0,
        common: Common { rate: 1.0, seed: 11, ..Common::default() },
        ..BonfireConfig::default()
    })
    .unwrap();
    let cfg = WarmupConfig {
        cache_percent: 50.0,
        warmup_percent: 25.0,
        region_bytes: 4096,
        ..Default::default()
    };
    // Th_V 90 %, Th_N 1 % (Table 2): cold misses the hourly reaccesses for about an hour,
    // more than 1 % of the day.
    let days = metrics_of(&t, &cfg, 0.9, 0.01);
    assert_eq!(days.len(), 2);
    for m in &days {
        let cold = get(m, "cold").converge_intervals;
        let last = get(m, "Last-K").converge_intervals;
        eprintln!(
            "convergence (10-min intervals): {:?}",
            m.iter().map(|x| (x.scheme.as_str(), x.converge_intervals)).collect::<Vec<_>>()
        );
        assert!(last < cold, "Last-K {last} vs cold {cold}");
        for s in ["First-K", "Top-K", "Random-K"] {
            let x = get(m, s).converge_intervals;
            assert!(last <= x, "Last-K {last} vs {s} {x}");
            assert!(x <= cold, "{s} {x} vs cold {cold}");
        }
    }
}

/// Section 4.3.3, "Daily Reaccesses": with per-day traces that "start right before the daily
/// reaccess events", "the server load reduction of First-K is 110 % while that of Last-K is
/// 87 %" (First-K reduces more server load than Last-K); every warmed scheme converges no
/// later than cold.
///
/// The gap, stated: on this generated trace First-K reduces the load by about 19-22 % and
/// Last-K by about 0.1 %, no more than cold: the previous day's last blocks are not the ones
/// the daily job reads, so Last-K brings nothing the job reuses, while on the paper's MSR
/// traces it still brought most of First-K's benefit (87 % against 110 %). What is asserted is
/// the paper's ordering with a margin that a First-K no better than Last-K fails: First-K at
/// least 10 points, and at least 10 points above Last-K and cold.
#[test]
fn bonfire_daily_trace_starting_before_the_job_first_k_reduces_far_more_load_than_last_k() {
    let t = bonfire(&BonfireConfig {
        days: 3.0,
        start_hour: 2,
        daily_hour: 2,
        daily_minutes: 120,
        daily_regions: 64,
        hourly: 0.5,
        common: Common { rate: 0.005, seed: 5, ..Common::default() },
        ..BonfireConfig::default()
    })
    .unwrap();
    let cfg = WarmupConfig {
        cache_percent: 100.0,
        warmup_percent: 25.0,
        region_bytes: 1 << 20,
        ..Default::default()
    };
    let days = metrics_of(&t, &cfg, 0.9, 0.01);
    assert_eq!(days.len(), 2);
    for m in &days {
        let first = get(m, "First-K").load_reduction_percent.unwrap();
        let last = get(m, "Last-K").load_reduction_percent.unwrap();
        let cold = get(m, "cold");
        let cold_load = cold.load_reduction_percent.unwrap_or(0.0);
        eprintln!(
            "load reduction: First-K {first:.1} %, Last-K {last:.1} %, cold {cold_load:.2} %"
        );
        assert!(first >= 10.0, "First-K {first} %");
        assert!(first >= last + 10.0, "First-K {first} % vs Last-K {last} %");
        assert!(first >= cold_load + 10.0, "First-K {first} % vs cold {cold_load} %");
        assert!(cold.converge_intervals > 0);
        for s in ["Last-K", "First-K", "Top-K", "Random-K"] {
            assert!(get(m, s).converge_intervals <= cold.converge_intervals, "{s}");
        }
    }
}

/// Section 6.1, Figure 10 (scaled down by 10 for test time: 500,000 4 KiB reads, Zipf alpha
/// 0.4 over 5 GB, split in halves, 25 intervals of 10,000 I/Os in the second half). The paper:
/// cold does not converge by the end of the trace; Last-K converges at 4 M (25 % warmup), 3.6 M
/// (50 %), 2.8 M (75 %) and at once (100 %), i.e. after 15, 11, 3 and 0 of these intervals.
///
/// What ember reproduces and asserts: cold does not converge within the half; 50 %, 75 % and
/// 100 % converge at once; 25 % serves clearly more reads from the cache than cold during the
/// half (its server load reduction is higher by at least 5 points).
///
/// The gap, stated: with 25 % ember's Last-K does not converge within the half (the paper:
/// after 60 % of it), and 50 % and 75 % converge at once (the paper: after 44 % and 12 %).
/// The generator's Zipf(0.4) over 5 GB has a much larger working set than the paper's 4.8 GB
/// (docs/reference/laboratory.md, "Known departures"), so the reachable hit rate and the warmup's
/// share of it differ.
#[test]
fn bonfire_figure10_zipf_bigger_warmup_converges_sooner_than_cold() {
    let blocks = 5 * (1 << 30) / 4096 / 4 * 4; // 5 GiB of 4 KiB blocks
    let t = ZipfConfig::new(0.4, blocks, 500_000, Common::with_seed(3)).trace().unwrap();
    // 1000 requests per second: halves of 250 s, intervals of 10,000 I/Os.
    let base = WarmupConfig {
        period_ns: 250_000_000_000,
        interval_ns: 10_000_000_000,
        cache_percent: 100.0,
        region_bytes: 4096,
        selectors: vec![SelectorKind::LastK],
        ..Default::default()
    };
    let mut rows = Vec::new();
    for w in [25.0, 50.0, 75.0, 100.0] {
        let days = metrics_of(&t, &WarmupConfig { warmup_percent: w, ..base.clone() }, 0.9, 0.03);
        assert_eq!(days.len(), 1);
        let m = &days[0];
        let (cold, last) = (get(m, "cold"), get(m, "Last-K"));
        rows.push((
            cold.converge_intervals,
            last.converge_intervals,
            cold.load_reduction_percent.unwrap_or(0.0),
            last.load_reduction_percent.unwrap_or(0.0),
        ));
    }
    eprintln!(
        "figure 10 (cold, Last-K intervals; cold, Last-K load %) at 25/50/75/100 %: {rows:?}"
    );
    let half = 25;
    assert!(rows.iter().all(|r| r.0 >= half), "cold converged within the half: {rows:?}");
    assert!(rows[1..].iter().all(|r| r.1 == 0), "50-100 % must converge at once: {rows:?}");
    assert!(rows[0].3 >= rows[0].2 + 5.0, "25 % warmup no better than cold: {rows:?}");
    assert!(rows.windows(2).all(|w| w[0].3 <= w[1].3), "load reduction falls: {rows:?}");
}
