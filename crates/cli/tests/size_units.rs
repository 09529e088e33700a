//! Every command reads a size the same way: `4M` is 4 MiB (4,194,304 bytes) and `4MB` is
//! 4,000,000 bytes, in `ember cache format`, `ember trace gen` and the trace-reading flags.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;
use std::process::Command;

/// Run ember; its stdout, or a panic with its stderr.
fn ember(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ember: {e}"));
    assert!(out.status.success(), "ember {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run ember, which must fail; its stderr.
fn ember_fails(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ember: {e}"));
    assert!(!out.status.success(), "ember {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `read_bytes` of `ember trace info --json` with `extra` flags.
fn read_bytes(trace: &Path, extra: &[&str]) -> u64 {
    let mut args = vec!["trace", "info", "--json", trace.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    let v: serde_json::Value = serde_json::from_str(&ember(&args)).expect("json");
    v["read_bytes"].as_u64().expect("read_bytes")
}

#[test]
fn cache_format_size_4mb_is_decimal_and_4m_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vol = dir.path().join("vol.img");
    std::fs::write(&vol, vec![0u8; 1 << 20]).expect("write volume");
    let volume = format!("v={}", vol.display());
    for (size, bytes) in [("4MB", 4_000_000u64), ("4M", 4_194_304), ("4 MiB", 4_194_304)] {
        let cache = dir.path().join(format!("cache-{}.img", size.replace(' ', "")));
        let c = cache.to_str().expect("utf-8 path");
        let out = ember(&[
            "cache",
            "format",
            "--cache",
            c,
            "--size",
            size,
            "--journal",
            "64KB",
            "--volume",
            &volume,
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["device_size"].as_u64(), Some(bytes), "--size {size}: {v:#}");
        assert_eq!(std::fs::metadata(&cache).expect("cache").len(), bytes, "--size {size}");
    }
    let cache = dir.path().join("never.img");
    let c = cache.to_str().expect("utf-8 path");
    let err =
        ember_fails(&["cache", "format", "--cache", c, "--size", "0.3K", "--volume", &volume]);
    assert!(err.contains("not a whole number of bytes") && err.contains("KB/MB/GB"), "{err}");
    assert!(!cache.exists());
}

#[test]
fn trace_gen_block_size_4mb_is_decimal_and_4m_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (size, bytes) in [("4MB", 4_000_000u64), ("4M", 4_194_304)] {
        let path = dir.path().join(format!("seq-{size}.msr"));
        let p = path.to_str().expect("utf-8 path");
        ember(&[
            "trace",
            "gen",
            "seq",
            "--blocks",
            "4",
            "--requests",
            "3",
            "--block-size",
            size,
            "-o",
            p,
        ]);
        assert_eq!(read_bytes(&path, &[]), 3 * bytes, "--block-size {size}");
    }
}

#[test]
fn trace_reading_block_size_4mb_is_decimal_and_4m_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An oracleGeneral record is one block: its request is --block-size bytes long.
    let path = dir.path().join("t.oracleGeneral.bin");
    let p = path.to_str().expect("utf-8 path");
    ember(&["trace", "gen", "seq", "--blocks", "4", "--requests", "5", "-o", p]);
    assert_eq!(read_bytes(&path, &["--block-size", "4MB"]), 5 * 4_000_000);
    assert_eq!(read_bytes(&path, &["--block-size", "4M"]), 5 * 4_194_304);
    assert_eq!(read_bytes(&path, &["--block-size", "4096"]), 5 * 4096);
    let err = ember_fails(&["trace", "info", p, "--block-size", "4XB"]);
    assert!(err.contains("unknown unit \"XB\""), "{err}");
}
