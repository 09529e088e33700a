//! `ember trace info` and `ember trace convert`, run as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data").join(name)
}

fn ember(args: &[&str]) -> Output {
    match Command::new(env!("CARGO_BIN_EXE_ember")).args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run ember: {e}"),
    }
}

fn info_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["trace", "info", "--json"];
    all.extend_from_slice(args);
    let o = ember(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    match serde_json::from_slice(&o.stdout) {
        Ok(v) => v,
        Err(e) => panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)),
    }
}

#[test]
fn info_counts_requests_volumes_and_working_set() {
    let p = data("msr_sample.csv");
    let v = info_json(&[p.to_str().unwrap_or_default()]);
    assert_eq!(v["format"], "msr");
    assert_eq!(v["requests"], 4);
    assert_eq!(v["reads"], 2);
    assert_eq!(v["writes"], 2);
    // Blocks: web_0 6517833728/4096 = 1591268 (twice), web_0 3649536/4096 = 891, prxy_1 two
    // blocks at 8192..16384.
    assert_eq!(v["wss_blocks"], 4);
    assert_eq!(v["wss_bytes"], 4 * 4096);
    assert_eq!(v["span_s"], 2.3320526);
    assert_eq!(v["volumes"][0]["name"], "web_0");
    assert_eq!(v["volumes"][0]["requests"], 3);
    assert_eq!(v["volumes"][0]["wss_blocks"], 2);
    assert_eq!(v["volumes"][1]["name"], "prxy_1");
    assert_eq!(v["volumes"][1]["wss_blocks"], 2);
    // A 512-byte block size splits the same requests finer.
    let v = info_json(&[p.to_str().unwrap_or_default(), "--block-size", "512"]);
    assert_eq!(v["wss_blocks"], 8 + 1 + 16);
}

#[test]
fn info_reports_malformed_lines_and_skips_them_on_request() {
    let p = data("msr_bad.csv");
    let o = ember(&["trace", "info", p.to_str().unwrap_or_default()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("msr_bad.csv:2: Type \"Trim\" is neither Read nor Write"), "{err}");
    let v = info_json(&[p.to_str().unwrap_or_default(), "--skip-bad"]);
    assert_eq!(v["requests"], 2);
    assert_eq!(v["skipped"], 2);
    let o = ember(&["trace", "info", p.to_str().unwrap_or_default(), "--skip-bad"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("skipped:      2 malformed"), "{out}");
}

#[test]
fn convert_round_trips_through_every_writable_format() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let src = data("msr_sample.csv");
    let src = src.to_str().unwrap_or_default();
    let want = info_json(&[src]);
    for (out, to) in
        [("a.ember", None), ("b.csv.gz", None), ("c.trace.zst", Some("msr")), ("d.out", None)]
    {
        let out = dir.path().join(out);
        let outs = out.to_str().unwrap_or_default();
        let mut args = vec!["trace", "convert", src, outs];
        if let Some(t) = to {
            args.extend_from_slice(&["--to", t]);
        }
        let o = ember(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut info_args = vec![outs];
        if let Some(t) = to {
            info_args.extend_from_slice(&["--format", t]);
        }
        let got = info_json(&info_args);
        for k in ["requests", "reads", "writes", "wss_blocks", "span_s", "volumes"] {
            assert_eq!(got[k], want[k], "{k} after converting to {}", out.display());
        }
    }
    // d.out has no known extension: ember's format by default.
    let raw = std::fs::read(dir.path().join("d.out")).unwrap_or_default();
    assert!(raw.starts_with(b"EMBERTRC"));
    // oracleGeneral: one record per block access.
    let og = dir.path().join("e.oracleGeneral.bin");
    let o = ember(&["trace", "convert", src, og.to_str().unwrap_or_default()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let len = std::fs::metadata(&og).map(|m| m.len()).unwrap_or(0);
    assert_eq!(len, 24 * 5, "4 requests touching 1 + 1 + 2 + 1 blocks");
    // Read-only formats are refused with a message.
    let o = ember(&["trace", "convert", src, "x.vscsi"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot write vscsi"));
}
