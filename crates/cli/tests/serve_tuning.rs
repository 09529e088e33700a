//! The write-back tuning flags of `ember serve` reach the engine, and bad
//! values are refused with a reason before anything is opened.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::process::Command;
use std::time::Duration;

fn start(dir: &std::path::Path, extra: &[&str]) -> Serve {
    let backing = dir.join("disk.img");
    sparse_file(&backing, 4 << 20);
    let cache = dir.join("cache.img");
    let _ = std::fs::remove_file(&cache);
    let spec = format!("disk={}", backing.display());
    let mut args = vec![
        "--cache",
        cache.to_str().unwrap(),
        "--cache-size",
        "6M",
        "--format-if-needed",
        "--backing",
        &spec,
        "--write-policy",
        "write-back-flush",
    ];
    args.extend_from_slice(extra);
    Serve::start(&args)
}

/// Ten 64 KiB writes (16 blocks each) through the server; returns the fallbacks to
/// write-through and the dirty writes it counted.
fn write_through_fallbacks(serve: &Serve, dir: &std::path::Path) -> (u64, u64) {
    let trace = dir.join("writes.csv");
    let reqs: Vec<Req> = (0..10).map(|i| ("disk".to_string(), true, i * 65536, 65536)).collect();
    write_csv_trace(&trace, &reqs);
    replay_json(&[trace.to_str().unwrap(), "--format", "csv", "--server", &serve.uri("disk")]);
    let s = scrape(&serve.metrics);
    (
        metric(&s, "ember_cache_write_through_fallbacks_total") as u64,
        metric(&s, "ember_cache_dirty_writes_total") as u64,
    )
}

#[test]
fn max_dirty_reaches_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    // The default (half the cache, about 250 blocks) takes all 160 blocks dirty.
    let serve = start(dir.path(), &[]);
    assert_eq!(write_through_fallbacks(&serve, dir.path()), (0, 160));
    serve.stop();
    // At most 8 dirty blocks: every 16-block write falls back to write-through.
    let serve =
        start(dir.path(), &["--max-dirty", "8", "--min-dirty", "0", "--flush-order", "lru"]);
    assert_eq!(write_through_fallbacks(&serve, dir.path()), (160, 0));
    serve.stop();
    // 10 % of about 500 blocks is more than 16: the writes go to the cache again.
    let serve = start(dir.path(), &["--max-dirty", "10%", "--max-epochs", "2"]);
    let (through, dirty) = write_through_fallbacks(&serve, dir.path());
    assert!(dirty >= 16 && through + dirty == 160, "{through} {dirty}");
    serve.stop();
}

#[test]
fn bad_tuning_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    sparse_file(&backing, 1 << 20);
    let cache = dir.path().join("cache.img");
    for (flag, value, why) in [
        ("--flush-order", "random", "ascending or lru"),
        ("--max-epochs", "0", "at least 1"),
        ("--max-dirty", "200%", "a percentage from 0 to 100"),
        ("--sieve-fraction", "0", "above 0 and at most 1"),
    ] {
        let o = run_status(
            Command::new(ember())
                .args(["serve", "--cache"])
                .arg(&cache)
                .args(["--cache-size", "6M", "--format-if-needed", "--backing"])
                .arg(format!("disk={}", backing.display()))
                .args(["--write-policy", "write-back-flush", "--listen", "127.0.0.1:0"])
                .args(["--admission", "randsieve-c", flag, value]),
            Duration::from_secs(30),
        );
        assert_ne!(o.status.code(), Some(0), "{flag} {value}");
        assert!(o.stderr.contains(why), "{flag} {value}: {}", o.stderr);
    }
}
