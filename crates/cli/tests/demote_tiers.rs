//! Wong & Wilkes' DEMOTE between two real `ember serve` tiers (docs/guide/demote.md, "Two
//! real tiers"). A client tier (`--demote`, memory cache) over an array tier
//! (`--array-scheme`, memory cache) over a file backing; Wong & Wilkes' RANDOM and ZIPF
//! workloads replayed with `ember replay` at queue depth 1 give the client and array hit rates
//! that `ember demote` (the simulator, the same `ArrayCache` code) predicts at the same sizes,
//! within 0.5 percentage points, for every scheme; and the array's DEMOTE counters (stored,
//! aborted) match the simulator's.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::path::Path;

const SCHEMES: [&str; 6] =
    ["none-lru", "demote-lru", "demote", "demote-slru", "demote-adapt-uni", "demote-adapt-exp"];

/// Capacity of a `mem:16M` cache in 4 KiB blocks (checked against the servers' metrics).
const CAP: u64 = 3044;

struct Live {
    reads: f64,
    client_hits: f64,
    array_hits: f64,
    stored: f64,
    aborted: f64,
    sent: f64,
    dropped: f64,
    client_said: String,
}

/// Run one scheme live: array tier, client tier, `ember replay` at queue depth 1.
fn live(dir: &Path, trace: &Path, scheme: &str) -> Live {
    let backing = dir.join("disk.img");
    sparse_file(&backing, 64 << 20);
    let array = array_tier(&backing, "16M", scheme, &[]);
    let client = client_tier(&array, "16M", "client0_0");
    for s in [&array, &client] {
        assert_eq!(metric(&scrape(&s.metrics), "ember_cache_capacity_blocks") as u64, CAP);
    }
    replay_qd1(trace, &client, "");
    let c = scrape(&client.metrics);
    let a = scrape(&array.metrics);
    let live = Live {
        reads: metric(&c, "ember_cache_read_hits_total")
            + metric(&c, "ember_cache_read_misses_total"),
        client_hits: metric(&c, "ember_cache_read_hits_total"),
        array_hits: metric(&a, "ember_cache_read_hits_total"),
        stored: metric(&a, "ember_cache_demotes_stored_total"),
        aborted: metric(&a, "ember_cache_demotes_aborted_cached_total")
            + metric(&a, "ember_cache_demotes_aborted_no_room_total"),
        sent: metric(&c, "ember_cache_demotes_sent_total"),
        dropped: metric(&c, "ember_cache_demotes_dropped_total"),
        client_said: client.output(),
    };
    client.stop();
    array.stop();
    live
}

/// `ember demote` on the same trace and sizes, every scheme, nothing left out as warm-up:
/// per scheme (reads, client hits, array hits, stored DEMOTEs, aborted DEMOTEs).
fn simulated(dir: &Path, trace: &Path) -> Vec<(String, [f64; 5])> {
    let json = dir.join("sim.json");
    let line = format!(
        "demote {{}} --scheme all --client-size {CAP} --array-size {CAP} --warmup none --quiet \
         --json {{}}"
    );
    ember_ok(&cmdline(&line, &[trace, &json]));
    let v = json_file(&json);
    let sum = |x: &serde_json::Value| {
        x.as_array().unwrap().iter().map(|n| n.as_f64().unwrap()).sum::<f64>()
    };
    v["schemes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let c = &s["result"]["clients"][0];
            let hits = &c["array_hits"];
            let misses = &c["misses"];
            let stored = hits[1].as_f64().unwrap() + misses[1].as_f64().unwrap();
            let aborted = hits[2].as_f64().unwrap() + misses[2].as_f64().unwrap();
            let name = s["scheme"].as_str().unwrap().to_string();
            (
                name,
                [
                    c["reads"].as_f64().unwrap(),
                    c["client_hits"].as_f64().unwrap(),
                    sum(hits),
                    stored,
                    aborted,
                ],
            )
        })
        .collect()
}

fn agree(workload: &str) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let gen = format!("{workload} --client-blocks {CAP} --array-blocks {CAP} --timed-multiplier 2");
    gen_trace(&gen, &trace);
    let sim = simulated(dir.path(), &trace);
    assert_eq!(sim.len(), SCHEMES.len());
    let mut table = String::new();
    for (scheme, (sim_name, [reads, c_hits, a_hits, stored, aborted])) in SCHEMES.iter().zip(&sim) {
        let l = live(dir.path(), &trace, scheme);
        let pct = |x: f64, n: f64| 100.0 * x / n;
        let line = format!(
            "{workload} {scheme} ({sim_name}): client live {:.2} % sim {:.2} %, array live {:.2} % \
             sim {:.2} %, stored live {} sim {stored}, aborted live {} sim {aborted}, sent {} dropped {}",
            pct(l.client_hits, l.reads),
            pct(*c_hits, *reads),
            pct(l.array_hits, l.reads),
            pct(*a_hits, *reads),
            l.stored,
            l.aborted,
            l.sent,
            l.dropped
        );
        eprintln!("{line}");
        table.push_str(&line);
        table.push('\n');
        assert_eq!(l.reads, *reads, "{line}");
        assert!((pct(l.client_hits, l.reads) - pct(*c_hits, *reads)).abs() <= 0.5, "{line}");
        assert!((pct(l.array_hits, l.reads) - pct(*a_hits, *reads)).abs() <= 0.5, "{line}");
        if *scheme == "none-lru" {
            assert!(l.client_said.contains("runs as NONE-LRU"), "{}", l.client_said);
            assert_eq!(l.sent, 0.0, "{line}");
        } else {
            assert!(l.client_said.contains("DEMOTE granted"), "{}", l.client_said);
            assert_eq!(l.dropped, 0.0, "queue depth 1 never fills the DEMOTE queue: {line}");
            assert!(l.stored > 0.0, "{line}");
            assert!((l.stored - stored).abs() <= 0.005 * reads, "{line}");
            assert!((l.aborted - aborted).abs() <= 0.005 * reads, "{line}");
        }
    }
    eprintln!("{table}");
}

#[test]
fn ww_random_live_tiers_match_the_simulator_for_every_scheme() {
    agree("ww-random");
}

#[test]
fn ww_zipf_live_tiers_match_the_simulator_for_every_scheme() {
    agree("ww-zipf");
}

/// A write-through client tier demotes the clean block a write miss evicts, as it does for a
/// read miss ("every clean block its replacement policy evicts"). The client (`mem:32M`, 7108
/// blocks) reads 7108 blocks; the array (`mem:16M`, 3044 blocks, DEMOTE-LRU) keeps the last
/// 3044 of them. 1000 writes to new blocks evict the client's 1000 oldest (0..999), which
/// only a DEMOTE can bring to the array; reading them again hits the array on the demoted
/// copies (every read verified by `ember replay`). Before write misses demoted, the array
/// served none of them (0 hits on demoted blocks, 1000 DEMOTEs sent instead of 2000).
#[test]
fn write_misses_demote_their_clean_victims() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    sparse_file(&backing, 64 << 20);
    let array = array_tier(&backing, "16M", "demote-lru", &[]);
    let client = client_tier(&array, "32M", "disk");
    assert_eq!(metric(&scrape(&client.metrics), "ember_cache_capacity_blocks"), 7108.0);
    let mut reqs = Vec::new();
    for b in 0..7108u64 {
        reqs.push(("disk".to_string(), false, b * 4096, 4096));
    }
    for b in 10000..11000u64 {
        reqs.push(("disk".to_string(), true, b * 4096, 4096));
    }
    let before = reqs.len();
    for b in 0..1000u64 {
        reqs.push(("disk".to_string(), false, b * 4096, 4096));
    }
    let trace = dir.path().join("rw.csv");
    write_csv_trace(&trace, &reqs);
    replay_qd1(&trace, &client, "--format csv");
    let c = scrape(&client.metrics);
    let a = scrape(&array.metrics);
    let (sent, dropped) = (
        metric(&c, "ember_cache_demotes_sent_total"),
        metric(&c, "ember_cache_demotes_dropped_total"),
    );
    let demoted_hits = metric(&a, "ember_cache_read_hits_demoted_total");
    eprintln!(
        "sent {sent} dropped {dropped}; array received {} stored {} stale {} cached {} no room {}, \
         hits on demoted blocks {demoted_hits}",
        metric(&a, "ember_cache_demotes_received_total"),
        metric(&a, "ember_cache_demotes_stored_total"),
        metric(&a, "ember_cache_demotes_refused_stale_total"),
        metric(&a, "ember_cache_demotes_aborted_cached_total"),
        metric(&a, "ember_cache_demotes_aborted_no_room_total"),
    );
    assert_eq!(dropped, 0.0);
    assert_eq!(sent, 2000.0, "1000 victims of the writes, then 1000 of the re-reads");
    assert_eq!(metric(&a, "ember_cache_demotes_stored_total"), 2000.0);
    assert_eq!(
        demoted_hits, 1000.0,
        "the re-reads ({} requests in) hit the demoted copies",
        before
    );
    client.stop();
    array.stop();
}
