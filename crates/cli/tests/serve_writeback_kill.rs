//! The write policies through the real `ember serve` command (not only the engine's test
//! server): qemu-io writes patterns and FLUSHes, the server is killed with SIGKILL, and every
//! flushed byte must be there afterwards. Write-back persist restarts on the same cache device
//! and reads back through ember; write-back flush and write-through throw the cache device away
//! and the backing file alone must hold the data (thesis table 3.1, destructive failure).
//! The many-trial versions are crates/engine/tests/writeback_{kill,power}.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serve_support::*;

const REGION: u64 = 64 * 1024;
const ROUNDS: u64 = 8;

/// The byte written over region `i` in trial `seed`.
fn pattern(seed: u64, i: u64) -> u8 {
    (0x11 + seed * 31 + i * 7) as u8 | 1
}

/// qemu-io: write region `i` with its pattern, then FLUSH.
fn write_and_flush(uri: &str, seed: u64, i: u64) {
    let cmd = format!("write -P {} {} {}", pattern(seed, i), i * REGION, REGION);
    let out = run(
        Command::new("qemu-io").args(["-f", "raw", uri, "-c", &cmd, "-c", "flush"]),
        Duration::from_secs(60),
    );
    assert!(out.contains("wrote"), "qemu-io write: {out}");
}

/// qemu-io: read region `i` and check its pattern.
fn read_back(uri: &str, seed: u64, i: u64) {
    let cmd = format!("read -P {} {} {}", pattern(seed, i), i * REGION, REGION);
    let out =
        run(Command::new("qemu-io").args(["-f", "raw", uri, "-c", &cmd]), Duration::from_secs(60));
    assert!(out.contains("read ") && !out.contains("Pattern verification failed"), "{out}");
}

fn check_backing_file(path: &Path, seed: u64) {
    let data = std::fs::read(path).expect("read backing");
    for i in 0..ROUNDS {
        let lo = (i * REGION) as usize;
        let region = &data[lo..lo + REGION as usize];
        let want = pattern(seed, i);
        let bad = region.iter().position(|&b| b != want);
        assert_eq!(
            bad,
            None,
            "region {i}: byte {:?} is not {want:#x} on backing",
            bad.map(|o| region[o])
        );
    }
}

fn trial(policy: &str, seed: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let backing = dir.path().join("backing.img");
    let cache = dir.path().join("cache.img");
    std::fs::write(&backing, vec![0u8; 16 << 20]).expect("backing file");
    let args = ServeArgs::file_cache(&cache, "32M")
        .backing("disk", backing.display())
        .args(["--write-policy", policy]);
    let serve = Serve::start(&args);
    for i in 0..ROUNDS {
        write_and_flush(&serve.uri("disk"), seed, i);
    }
    // SIGKILL: no drain, no clean shutdown.
    drop(serve);

    if policy == "write-back-persist" {
        // Recoverable failure: the cache device survives and holds the dirty data.
        let serve = Serve::start(&args);
        let text = serve.lines.lock().map(|l| l.join("\n")).unwrap_or_default();
        assert!(text.contains("after a crash"), "restart did not recover:\n{text}");
        for i in 0..ROUNDS {
            read_back(&serve.uri("disk"), seed, i);
        }
        serve.stop();
    } else {
        // Destructive failure: the cache device is gone; backing alone must hold every flush.
        std::fs::remove_file(&cache).expect("remove cache");
        check_backing_file(&backing, seed);
    }
}

#[test]
fn write_back_persist_survives_sigkill_on_the_same_cache_device() {
    trial("write-back-persist", 1);
}

#[test]
fn write_back_flush_survives_sigkill_with_the_cache_device_thrown_away() {
    trial("write-back-flush", 2);
}

#[test]
fn write_through_survives_sigkill_with_the_cache_device_thrown_away() {
    trial("write-through", 3);
}

/// Negative control: the same check must catch unsafe write-back, which ignores FLUSH and keeps
/// the data only in the cache (the flusher leaves fewer than `min_dirty` blocks alone), so the
/// checker above can fail.
#[test]
#[should_panic(expected = "on backing")]
fn unsafe_write_back_is_caught_losing_flushed_writes() {
    trial("unsafe-write-back", 4);
}
