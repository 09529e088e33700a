//! Bonfire's performance snapshot in `ember serve` (`--warmup-snapshot`) with real
//! clients: a restarted memory cache preloads the blocks `ember replay` read from the
//! snapshot, not from backing, and exactly those hit once each (`preloaded_hits`); a snapshot
//! copy older than a later flushed write is not used (nbdsh writes, flushes and kills the
//! server with SIGKILL right after the FLUSH returns); a backing modified while ember was
//! down disables the snapshot; a damaged or truncated snapshot falls back to backing, with a
//! line; `--warmup auto` picks Top-K on a log where Top-K converges sooner.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::path::Path;
use std::time::{Duration, Instant};

use serve_support::*;

const SEED: &str = "31";

fn warmup_stats(serve: &Serve) -> serde_json::Value {
    serve_stats(serve)["warmup"].clone()
}

/// The memory cache of these tests, with a snapshot of 16-block segments.
fn snap_args(backing: &Path, log: &Path, extra: &[&str]) -> ServeArgs {
    ServeArgs::mem_cache("32M")
        .backing("disk", backing.display())
        .args(["--warmup-log", log.to_str().unwrap(), "--warmup-region", "4K"])
        .args(["--warmup-snapshot", "--warmup-snapshot-staging", "64K"])
        .args(["--warmup-snapshot-size", "4M"])
        .args(extra)
}

#[test]
fn restart_preloads_from_the_snapshot_and_counts_hits_on_preloaded_blocks() {
    let (dir, backing, trace) = patterned_disk(31, 300, 5);
    let log = dir.path().join("warmup.wlog");
    let args = snap_args(&backing, &log, &[]);
    let serve = Serve::start(&args);
    assert_eq!(replay_verified(&trace, "csv", &serve, SEED), (0, 300));
    serve.stop();
    let snap = dir.path().join("warmup.wlog.snapshot");
    assert!(snap.exists());

    let serve = Serve::start(&args);
    let out = serve.output();
    assert!(
        out.contains("preloading 300 blocks")
            && out.contains("300 of them from the performance snapshot"),
        "{out}"
    );
    wait_warmup_state(&serve, 3.0);
    let w = warmup_stats(&serve);
    assert_eq!(w["preloaded_blocks"], 300.0, "{w:#}");
    assert_eq!(w["preloaded_from_snapshot_blocks"], 300.0, "{w:#}");
    assert_eq!(w["preloaded_from_backing_blocks"], 0.0, "{w:#}");
    assert_eq!(w["preloaded_hits"], 0.0, "{w:#}");
    // Every read verified against the backing's pattern: the snapshot's data is right.
    assert_eq!(replay_verified(&trace, "csv", &serve, SEED), (300, 0));
    let w = warmup_stats(&serve);
    assert_eq!(w["preloaded_hits"], 300.0, "N preloaded blocks read once: N hits {w:#}");
    // Counted once per block: a second pass hits again but adds no preloaded hit.
    assert_eq!(replay_verified(&trace, "csv", &serve, SEED), (300, 0));
    let w = warmup_stats(&serve);
    assert_eq!(w["preloaded_hits"], 300.0, "{w:#}");
    assert!(w["snapshot_bytes_written"].as_f64().unwrap() > 0.0, "{w:#}");
    let table = serve_stats_table(&serve);
    assert!(table.contains("warmup: 300 hits on preloaded blocks"), "{table}");
    assert!(table.contains("preloaded 300 from the snapshot, 0 from backing"), "{table}");
    let out = serve.stop();
    assert!(out.contains("300 from the performance snapshot"), "{out}");

    // The backing modified while ember was down (same bytes rewritten elsewhere, and one
    // block of the trace given new content): the snapshot is not used, the new byte reads.
    let first = std::fs::read_to_string(&trace).unwrap();
    let block: u64 = first
        .lines()
        .find_map(|l| l.split(',').nth(3).and_then(|o| o.trim().parse::<u64>().ok()))
        .map(|off| off / 4096)
        .expect("a read in the trace");
    write_at(&backing, block * 4096, &[0x5a; 4096]);
    let serve = Serve::start(&args);
    let out = serve.output();
    assert!(out.contains("its backing was modified while ember was down"), "{out}");
    assert!(out.contains("0 of them from the performance snapshot"), "{out}");
    wait_warmup_state(&serve, 3.0);
    qemu_io(&serve.uri("disk"), &format!("read -P 0x5a {} 4096", block * 4096));
    let w = warmup_stats(&serve);
    assert_eq!(w["preloaded_from_snapshot_blocks"], 0.0, "{w:#}");
    assert!(w["preloaded_from_backing_blocks"].as_f64().unwrap() >= 299.0, "{w:#}");
    serve.stop();
}

#[test]
fn a_snapshot_older_than_a_later_flushed_write_is_not_used() {
    if !have_nbdsh() && skip_or_fail("nbdsh is not installed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    let log = dir.path().join("warmup.wlog");
    sparse_file(&backing, 16 << 20);
    // The writer drains the metadata staging buffer every 2 s only: a write's record stays
    // staged (in memory) for up to 2 s unless a FLUSH drains it.
    let args = snap_args(&backing, &log, &["--warmup-log-interval", "2s"]);
    let serve = Serve::start(&args);
    // A: 16 blocks of 0xaa, written and read (cached), then copied into the snapshot: one
    // full 16-block segment.
    qemu_io(&serve.uri("disk"), "write -P 0xaa 0 64K; read -P 0xaa 0 64K");
    let t = Instant::now();
    while metric(&scrape(&serve.metrics), "ember_warmup_snapshot_bytes_written_total") == 0.0 {
        assert!(t.elapsed() < MIN, "no snapshot segment written:\n{}", serve.output());
        std::thread::sleep(Duration::from_millis(50));
    }
    // B: 0xbb over the first 4 blocks, FLUSH, and SIGKILL at once (from the client, so the
    // writer has no time to drain the record by itself).
    let uri = serve.uri("disk");
    let script = format!(
        "import os\nh.pwrite(b'\\xbb' * 16384, 0)\nh.flush()\nos.kill({}, 9)\n",
        serve.pid()
    );
    run(nbdsh().args(["-u", &uri, "-c", &script]), MIN);
    let _ = serve.kill();

    let serve = Serve::start(&args);
    let out = serve.output();
    assert!(out.contains("12 of them from the performance snapshot"), "{out}");
    assert!(out.contains("4 copies older than a logged write"), "{out}");
    wait_warmup_state(&serve, 3.0);
    qemu_io(&serve.uri("disk"), "read -P 0xbb 0 16K; read -P 0xaa 16K 48K");
    let w = warmup_stats(&serve);
    assert_eq!(w["preloaded_from_snapshot_blocks"], 12.0, "{w:#}");
    serve.stop();
}

#[test]
fn a_damaged_or_truncated_snapshot_falls_back_to_backing() {
    let (dir, backing, trace) = patterned_disk(31, 100, 9);
    let log = dir.path().join("warmup.wlog");
    let args = snap_args(&backing, &log, &[]);
    let snap = dir.path().join("warmup.wlog.snapshot");
    // Each case starts from a fresh history: one run that reads the 100 blocks.
    let history = || {
        let _ = std::fs::remove_file(&log);
        let serve = Serve::start(&args);
        replay_verified(&trace, "csv", &serve, SEED);
        serve.stop();
        std::fs::read(&snap).unwrap()
    };
    let good = history();
    // A damaged header: metadata-only preload, with the reason.
    let mut bad = good.clone();
    bad[40] ^= 1;
    std::fs::write(&snap, &bad).unwrap();
    let serve = Serve::start(&args);
    let out = serve.output();
    assert!(
        out.contains("is unusable (its header is damaged (checksum))")
            && out.contains("metadata-only preload"),
        "{out}"
    );
    wait_warmup_state(&serve, 3.0);
    assert_eq!(
        replay_verified(&trace, "csv", &serve, SEED),
        (100, 0),
        "preloaded from backing, every read right"
    );
    assert_eq!(warmup_stats(&serve)["preloaded_from_snapshot_blocks"], 0.0);
    serve.stop();

    // Truncated in its second segment: the first segment (16 blocks) is used, the rest of
    // the blocks come from backing, and the line says segments were unreadable.
    let good = history();
    let seg = 4096 + 16 * 4096; // index + data of a 64K slot
    std::fs::write(&snap, &good[..4096 + seg + 4096 + 1000]).unwrap();
    let serve = Serve::start(&args);
    let out = serve.output();
    assert!(out.contains("16 of them from the performance snapshot"), "{out}");
    assert!(out.contains("unreadable or torn"), "{out}");
    wait_warmup_state(&serve, 3.0);
    assert_eq!(replay_verified(&trace, "csv", &serve, SEED), (100, 0));
    let w = warmup_stats(&serve);
    assert_eq!(
        (w["preloaded_from_snapshot_blocks"].as_f64(), w["preloaded_blocks"].as_f64()),
        (Some(16.0), Some(100.0)),
        "{w:#}"
    );
    serve.stop();

    // Data damaged inside a segment: that copy fails its checksum and comes from backing.
    let good = history();
    let mut bad = good.clone();
    bad[4096 + 4096 + 100] ^= 0xff; // first copy of the first segment
    std::fs::write(&snap, &bad).unwrap();
    let serve = Serve::start(&args);
    wait_warmup_state(&serve, 3.0);
    assert_eq!(replay_verified(&trace, "csv", &serve, SEED), (100, 0));
    let w = warmup_stats(&serve);
    assert_eq!(w["snapshot_bad_blocks"], 1.0, "{w:#}");
    assert_eq!(w["preloaded_blocks"], 100.0, "{w:#}");
    let out = serve.stop();
    assert!(out.contains("1 of its copies unreadable or failing their checksum"), "{out}");
}
