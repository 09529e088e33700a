//! Through the built `ember serve` and qemu-io: a backing changed while ember
//! was stopped must never be served from the old cached copies. A file backing is checked
//! (identity, size, modification and change times) and starts cold with a line saying why;
//! an NBD backing cannot be checked, so its clean map is dropped unless `--trust-nbd-backing`
//! says the export is ember's alone (in the run that shut down and in the one that starts).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;

const BLOCK: u64 = 4096;

/// qemu-io: read `len` bytes at `offset` and check every byte is `byte`.
fn read_pattern(uri: &str, byte: u8, offset: u64, len: u64) {
    let out = qemu_io(uri, &format!("read -P {byte:#x} {offset} {len}"));
    assert!(out.contains("read "), "qemu-io on {uri}: {out}");
}

fn start_line(log: &str) -> String {
    log.lines().find(|l| l.contains(" start ")).unwrap_or_default().to_string()
}

#[test]
fn a_file_backing_overwritten_while_stopped_is_read_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("disk.img"));
    filled_file(&backing, 1 << 20, 0x11);
    let args = ServeArgs::file_cache(&cache, "16M").backing("disk", backing.display());
    let serve = Serve::start(&args);
    read_pattern(&serve.uri("disk"), 0x11, 3 * BLOCK, BLOCK); // block 3 is cached now
    read_pattern(&serve.uri("disk"), 0x11, 3 * BLOCK, BLOCK);
    let log = serve.stop();
    assert!(log.contains("clean shutdown: 1 blocks persisted"), "{log}");

    // Behind ember's back: block 3 gets other bytes.
    write_at(&backing, 3 * BLOCK, &[0x22; BLOCK as usize]);
    let serve = Serve::start(&args);
    let log = serve.lines.lock().unwrap().join("\n");
    let line = start_line(&log);
    assert!(line.contains("start Cold"), "{log}");
    assert!(line.contains("disk") && line.contains("changed while ember was stopped"), "{line}");
    read_pattern(&serve.uri("disk"), 0x22, 3 * BLOCK, BLOCK);
    read_pattern(&serve.uri("disk"), 0x11, 2 * BLOCK, BLOCK);
    serve.stop();

    // Untouched while stopped: warm, and the new bytes are what is cached.
    let serve = Serve::start(&args);
    let log = serve.lines.lock().unwrap().join("\n");
    assert!(start_line(&log).contains("start Warm (2 blocks loaded"), "{log}");
    read_pattern(&serve.uri("disk"), 0x22, 3 * BLOCK, BLOCK);
    serve.stop();
}

#[test]
fn an_nbd_backing_starts_cold_unless_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("disk.img"));
    filled_file(&backing, 1 << 20, 0x33);
    let nbdkit = Nbdkit::start(dir.path(), &["file", backing.to_str().unwrap()]);
    let args = ServeArgs::file_cache(&cache, "16M").backing("disk", nbdkit.uri());
    let serve = Serve::start(&args);
    read_pattern(&serve.uri("disk"), 0x33, 3 * BLOCK, BLOCK);
    serve.stop();

    // Default: ember cannot know what happened to an NBD export while it was stopped.
    let serve = Serve::start(&args);
    let log = serve.lines.lock().unwrap().join("\n");
    let line = start_line(&log);
    assert!(line.contains("start Cold") && line.contains("--trust-nbd-backing"), "{log}");
    read_pattern(&serve.uri("disk"), 0x33, 3 * BLOCK, BLOCK);
    serve.stop();

    // Told the export is ember's alone: a run that trusted it records its identity, and the
    // next trusting start keeps the map of that run's clean shutdown.
    let trusted = args.clone().arg("--trust-nbd-backing");
    let serve = Serve::start(&trusted);
    read_pattern(&serve.uri("disk"), 0x33, 3 * BLOCK, BLOCK);
    serve.stop();
    let serve = Serve::start(&trusted);
    let log = serve.lines.lock().unwrap().join("\n");
    assert!(start_line(&log).contains("start Warm (1 blocks loaded"), "{log}");
    serve.stop();
}
