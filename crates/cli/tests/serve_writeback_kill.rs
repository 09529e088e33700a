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

fn check_regions(path: &Path, seed: u64, regions: std::ops::Range<u64>) {
    let data = std::fs::read(path).expect("read backing");
    for i in regions {
        let lo = (i * REGION) as usize;
        let want = pattern(seed, i);
        let bad = data[lo..lo + REGION as usize].iter().position(|&b| b != want);
        assert_eq!(bad, None, "region {i} of {} is not {want:#x} on backing", path.display());
    }
}

/// One trial of a volume with a write policy of its own under a write-back persist cache:
/// `wt` is written under write-back persist (its blocks dirty, committed), then given
/// write-through while serving, then every region rewritten; `disk` stays write-back persist.
/// After SIGKILL, `wt`'s backing holds every rewrite, and the restarted server (on the same
/// cache device, without the setting) serves the rewrites of `wt`, never the dirty versions
/// recovered from before, and every flushed byte of `disk`.
fn own_write_policy_trial(seed: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display();
    for name in ["disk", "wt"] {
        std::fs::write(dir.path().join(format!("{name}.img")), vec![0u8; 16 << 20]).unwrap();
    }
    let config = dir.path().join("ember.toml");
    std::fs::write(
        &config,
        format!(
            "control = \"{d}/ctl.sock\"\n\n[cache]\ndevice = \"{d}/cache.img\"\nsize = \"32M\"\n\
             format-if-needed = true\n\n[live]\nwrite-policy = \"write-back-persist\"\n\n\
             [[volume]]\nname = \"disk\"\nbacking = \"{d}/disk.img\"\n\n\
             [[volume]]\nname = \"wt\"\nbacking = \"{d}/wt.img\"\n"
        ),
    )
    .unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let serve = Serve::start(&args);
    for i in 0..ROUNDS / 2 {
        write_and_flush(&serve.uri("disk"), seed, i);
        write_and_flush(&serve.uri("wt"), seed, i);
    }
    let sock = dir.path().join("ctl.sock");
    run(
        Command::new(ember()).args(["ctl", "--control"]).arg(&sock).args([
            "set",
            "--volume",
            "wt",
            "write-policy",
            "write-through",
        ]),
        Duration::from_secs(60),
    );
    let again = seed + 100;
    for i in 0..ROUNDS {
        write_and_flush(&serve.uri("wt"), again, i);
    }
    for i in ROUNDS / 2..ROUNDS {
        write_and_flush(&serve.uri("disk"), seed, i);
    }
    check_regions(&dir.path().join("wt.img"), again, 0..ROUNDS);
    // SIGKILL: no drain, no clean shutdown.
    drop(serve);
    check_regions(&dir.path().join("wt.img"), again, 0..ROUNDS);
    let serve = Serve::start(&args);
    for i in 0..ROUNDS {
        read_back(&serve.uri("wt"), again, i);
        read_back(&serve.uri("disk"), seed, i);
    }
    serve.stop();
}

/// Three trials; `EMBER_VOLUME_POLICY_TRIALS=N` runs N (`make crash-long`: 200).
#[test]
fn a_write_through_volume_under_write_back_persist_survives_sigkill() {
    let n: u64 =
        std::env::var("EMBER_VOLUME_POLICY_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    for seed in 5..5 + n {
        own_write_policy_trial(seed);
    }
    println!("a write-through volume under write-back persist: {n} SIGKILL trials passed");
}
