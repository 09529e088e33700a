//! Warm restarts of the built `ember serve`: a replay's reads counted as misses then hits,
//! SIGTERM, restart on the same cache, and every block read in the first pass hits (metrics
//! and `ember stats` say so). Then the same over a slow backing (nbdkit's delay filter, 5 ms
//! per read): the first pass misses every block, the second pass and a pass after a clean
//! restart hit every one. How much faster the warm passes are is timing, measured by
//! `bench/warm-restart`, not asserted here. Every read is verified: the backing files hold the
//! replay pattern from the start.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;

const SEED: &str = "77";

fn pass(trace: &std::path::Path, serve: &Serve, export: &str) -> serde_json::Value {
    replay_checked(trace, "csv", serve, export, SEED)
}

#[test]
fn warm_restart_keeps_the_first_pass_hits() {
    let (dir, backing, trace) = patterned_disk(77, 300, 9);
    let cache = dir.path().join("cache.img");
    let args = ServeArgs::file_cache(&cache, "16M").backing("disk", backing.display());
    let serve = Serve::start(&args);
    assert_eq!(hits_misses(&pass(&trace, &serve, "disk")), (0, 300), "first pass misses");
    assert_eq!(hits_misses(&pass(&trace, &serve, "disk")), (300, 0), "second pass hits");
    let log = serve.stop();
    assert!(log.contains("clean shutdown: 300 blocks persisted"), "{log}");

    let serve = Serve::start(&args);
    let log = serve.output();
    assert!(log.contains("start Warm (300 blocks loaded"), "{log}");
    assert_eq!(hits_misses(&pass(&trace, &serve, "disk")), (300, 0));
    let samples = scrape(&serve.metrics);
    assert_eq!(metric(&samples, "ember_cache_read_hits_total"), 300.0);
    assert_eq!(metric(&samples, "ember_cache_read_misses_total"), 0.0);
    assert_eq!(metric(&samples, "ember_cache_resident_blocks"), 300.0);
    let stats = serve_stats(&serve);
    assert_eq!(stats["volumes"]["disk"]["read_hits"], 300, "{stats:#}");
    assert_eq!(stats["volumes"]["disk"]["read_misses"], 0);
    assert_eq!(stats["nbd"]["read"]["count"], 300);
    let table = serve_stats_table(&serve);
    assert!(table.contains("read hit ratio") && table.contains("100.00%"), "{table}");
    serve.stop();
}

#[test]
fn slow_backing_second_pass_and_a_pass_after_restart_hit_every_block() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("slow.img"));
    patterned_backing(&backing, 16 << 20, 77);
    let mut nbdkit = Nbdkit::start(
        dir.path(),
        &["--filter=delay", "file", backing.to_str().unwrap(), "rdelay=5ms"],
    );
    let trace = dir.path().join("reads.csv");
    // 400 distinct blocks: ≥ 2 s of backing delay in the first pass; all fit the cache.
    write_csv_trace(&trace, &random_block_reads("slow", 400, 4096, 21));
    // Only ember writes this export: keep its map across the restart.
    let args = ServeArgs::file_cache(&cache, "16M")
        .backing("slow", nbdkit.uri())
        .arg("--trust-nbd-backing");
    let serve = Serve::start(&args);
    let first = pass(&trace, &serve, "slow");
    assert_eq!(hits_misses(&first), (0, 400), "first pass: every block from the slow backing");
    let second = pass(&trace, &serve, "slow");
    assert_eq!(hits_misses(&second), (400, 0), "second pass: every block a hit");
    serve.stop();

    let serve = Serve::start(&args);
    let log = serve.output();
    assert!(log.contains("start Warm (400 blocks loaded"), "{log}");
    let third = pass(&trace, &serve, "slow");
    assert_eq!(hits_misses(&third), (400, 0), "after a clean restart: every block a hit");
    eprintln!(
        "slow backing: first pass {} s, second {} s, after restart {} s (not asserted)",
        first["seconds"], second["seconds"], third["seconds"]
    );
    serve.stop();
    nbdkit.stop();
}
