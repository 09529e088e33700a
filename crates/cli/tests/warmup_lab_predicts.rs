//! The laboratory predicts the real cache: a small version of
//! bench/warmup-live at queue depth 1. `ember serve` on a memory cache with a warmup log
//! serves the first half of a Bonfire trace (`ember trace gen bonfire`: hourly reaccesses and
//! one-offs) through `ember replay` (every read verified), is killed with SIGKILL, restarts,
//! preloads from the log (Last-K, 4 KiB regions, the whole cache as the budget: the first
//! half's distinct blocks) and serves the second half.
//! Then `ember warmup run` on that very log, with the live cache's capacity and warmup size
//! (as percentages of the log's working set) and the period cut at the restart, must give a
//! post-restart read hit ratio within 5 points of the live one, for Last-K and for cold.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::path::Path;
use std::time::{Duration, Instant};

use serve_support::*;

const SEED: &str = "41";
/// Backing volume: 64 MiB, 16384 blocks.
const VOLUME_BLOCKS: u64 = 16384;

/// Replay `trace` (MSR CSV) onto export `disk`, every read verified; returns (hits, misses).
fn replay(trace: &Path, serve: &Serve) -> (u64, u64) {
    let r = replay_checked(trace, "msr", serve, "disk", SEED);
    assert_eq!(r["queue_depth"], 1);
    hits_misses(&r)
}

/// Read hit percent of `scheme` in `ember warmup run`'s JSON, and its period's reads.
fn lab_hit_percent(doc: &serde_json::Value, scheme: &str) -> (f64, u64) {
    let periods = doc["periods"].as_array().unwrap();
    assert_eq!(periods.len(), 1, "one period after the first: the second half");
    let p = &periods[0];
    let m = p["metrics"].as_array().unwrap().iter().find(|m| m["scheme"] == scheme).unwrap();
    let run = p["runs"]["runs"].as_array().unwrap().iter().find(|r| r["scheme"] == scheme);
    let reads = run.unwrap()["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["reads"].as_u64().unwrap())
        .sum();
    (m["read_hit_percent"].as_f64().unwrap(), reads)
}

#[test]
fn warmup_run_on_the_live_log_predicts_the_post_restart_hit_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    patterned_backing(&backing, VOLUME_BLOCKS * 4096, 41);
    // 16,000 reads: 60 % hourly reaccesses (mean age 60 s of trace time, 6,000 reads), 40 %
    // one-offs over the volume: about 6,400 distinct blocks, more than the cache (5,076) holds.
    let trace = dir.path().join("trace.csv");
    ember_stdout(&[
        "trace",
        "gen",
        "bonfire",
        "--rate",
        "100",
        "--days",
        &format!("{:.9}", 160.0 / 86400.0),
        "--hourly-mean-age",
        "60",
        "--daily-regions",
        "0",
        "--blocks",
        &VOLUME_BLOCKS.to_string(),
        "--seed",
        "3",
        "-o",
        trace.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 16000, "the generator's request count");
    let half = lines.len() / 2;
    let (first, second) = (dir.path().join("first.csv"), dir.path().join("second.csv"));
    std::fs::write(&first, lines[..half].join("\n") + "\n").unwrap();
    std::fs::write(&second, lines[half..].join("\n") + "\n").unwrap();

    let log = dir.path().join("warmup.wlog");
    let b = format!("disk={}", backing.display());
    let args = [
        "--cache",
        "mem:24M",
        "--backing",
        &b,
        "--warmup-log",
        log.to_str().unwrap(),
        "--warmup",
        "last-k",
        "--warmup-region",
        "4K",
        "--warmup-size",
        "100%",
    ];
    let serve = Serve::start(&args);
    let capacity = metric(&scrape(&serve.metrics), "ember_cache_capacity_blocks") as u64;
    let replayed = Instant::now();
    replay(&first, &serve);
    let first_took = replayed.elapsed();
    // The log writer drains the staging buffer every 10 ms: kill once every request is in
    // the log file (32 bytes a record), so the kill loses nothing the laboratory needs.
    let t = Instant::now();
    while metric(&scrape(&serve.metrics), "ember_warmup_log_bytes_written_total")
        < (half * 32) as f64
    {
        assert!(t.elapsed() < MIN, "the log writer did not write the first half");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(serve.kill().is_ok(), "ember serve exited before the kill");
    // The laboratory's period is the first half plus the restart's gap, and the second half
    // must fit in it: on a loaded machine the second half's replay can take longer than the
    // first's (seen: a failure at "the second half fits one period"), so the gap is made
    // three times the first half's replay, plus a second.
    std::thread::sleep(3 * first_took + Duration::from_secs(1));

    let serve = Serve::start(&args);
    // The budget is the whole cache; the plan holds at most the first half's distinct blocks.
    let out = serve.output();
    let warmup_blocks: u64 = out
        .split("preloading ")
        .nth(1)
        .and_then(|s| s.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no preload line:\n{out}"));
    assert!(warmup_blocks > capacity / 2 && warmup_blocks <= capacity, "{out}");
    wait_warmup_state(&serve, 3.0);
    let (hits, misses) = replay(&second, &serve);
    assert_eq!(hits + misses, half as u64);
    serve.stop();
    let live = 100.0 * hits as f64 / (hits + misses) as f64;

    // A cold restart, live, for the cold row.
    let cold_serve = Serve::start(&["--cache", "mem:24M", "--backing", &b]);
    let (ch, cm) = replay(&second, &cold_serve);
    cold_serve.stop();
    let live_cold = 100.0 * ch as f64 / (ch + cm) as f64;

    // The log as a trace: both halves (the log continued after the restart), with the
    // restart as the widest gap between two requests.
    let csv = dir.path().join("log.csv");
    let times: Vec<u64> = convert_trace(&log, &csv, "csv")
        .iter()
        .filter_map(|l| l.split(',').next()?.trim().parse().ok())
        .collect();
    assert_eq!(times.len(), 2 * half, "every request of both halves is in the log");
    let gap_at = (1..times.len()).max_by_key(|&i| times[i].saturating_sub(times[i - 1])).unwrap();
    assert_eq!(gap_at, half, "the restart is the widest gap");
    // Period 1 starts exactly at the first request after the restart.
    let period = times[half] - times[0];
    assert!(times[times.len() - 1] - times[half] < period, "the second half fits one period");
    let info: serde_json::Value =
        serde_json::from_str(&ember_stdout(&["trace", "info", "--json", log.to_str().unwrap()]))
            .unwrap();
    let wss = info["wss_blocks"].as_u64().unwrap();
    assert!(wss > capacity, "the working set ({wss}) exceeds the cache ({capacity})");
    let pct = |blocks: u64| format!("{:.6}", 100.0 * blocks as f64 / wss as f64);
    let json = dir.path().join("lab.json");
    ember_stdout(&[
        "warmup",
        "run",
        log.to_str().unwrap(),
        "--period",
        &format!("{period}ns"),
        "--interval",
        &format!("{period}ns"),
        "--cache",
        &pct(capacity),
        "--warmup",
        &pct(warmup_blocks),
        "--region",
        "4KiB",
        "--schemes",
        "last-k",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let day = &doc["periods"][0]["runs"];
    assert_eq!(day["capacity_blocks"].as_u64(), Some(capacity), "{day:#}");
    assert_eq!(day["warmup_blocks"].as_u64(), Some(warmup_blocks));
    let (lab, reads) = lab_hit_percent(&doc, "Last-K");
    let (lab_cold, _) = lab_hit_percent(&doc, "cold");
    assert_eq!(reads, half as u64);
    eprintln!(
        "post-restart read hit ratio: live Last-K {live:.2} %, laboratory {lab:.2} %; \
         live cold {live_cold:.2} %, laboratory {lab_cold:.2} % \
         (cache {capacity} blocks, warmup {warmup_blocks}, working set {wss})"
    );
    assert!(live > live_cold + 5.0, "the preload must matter: {live:.2} vs cold {live_cold:.2}");
    assert!((lab - live).abs() <= 5.0, "Last-K: laboratory {lab:.2} %, live {live:.2} %");
    assert!(
        (lab_cold - live_cold).abs() <= 5.0,
        "cold: lab {lab_cold:.2} %, live {live_cold:.2} %"
    );
}
