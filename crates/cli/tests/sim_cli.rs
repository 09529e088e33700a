//! End-to-end: the built `ember sim` on a small MSR-Cambridge trace file, checking the JSON,
//! CSV and PNG it writes.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::trace::MsrRow;
use ember_testkit::MSR_T0;
use ember_testkit::{cmdline, ember_fails, ember_ok, ember_stdout, json_file, write_msr_trace};
use std::path::{Path, PathBuf};

/// a(R) b(W) a(R) c(R) b(W), one second apart, 4 KiB blocks 0, 1, 0, 2, 1 of volume hm_0.
fn write_trace(dir: &Path) -> PathBuf {
    let rows = [(false, 0), (true, 4096), (false, 0), (false, 8192), (true, 4096)];
    let rows: Vec<MsrRow> = (0..)
        .zip(rows)
        .map(|(i, (write, off))| (MSR_T0 + i * 10_000_000, write, off, 4096))
        .collect();
    write_msr_trace(dir, &rows)
}

#[test]
fn sim_writes_exact_counters() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let out = dir.path().join("out");
    let line = "sim {} --format msr --policy lru,fifo --size 2,100% --interval 2s --out {} --quiet";
    let stdout = ember_stdout(&cmdline(line, &[&trace, &out]));
    assert!(stdout.contains("working set 3 blocks"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("lru") || l.starts_with("fifo")).count(), 4);

    let j = json_file(&out.join("sim.json"));
    assert_eq!(j["requests"], 5);
    assert_eq!(j["block_accesses"], 5);
    assert_eq!(j["wss_blocks"], 3);
    assert_eq!(j["block_size"], 4096);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    let get = |i: usize, k: &str| runs[i][k].as_u64().unwrap();
    // LRU, 2 blocks: a miss, b miss, a hit, c miss (evicts b), b miss (evicts a).
    assert_eq!(runs[0]["policy"], "lru");
    assert_eq!(runs[0]["size"], "2");
    assert_eq!(get(0, "capacity_blocks"), 2);
    assert_eq!((get(0, "read_hits"), get(0, "write_hits"), get(0, "misses")), (1, 0, 4));
    assert_eq!((get(0, "read_misses"), get(0, "write_misses")), (2, 2));
    assert_eq!((get(0, "allocation_writes"), get(0, "evictions")), (4, 2));
    assert_eq!((get(0, "reads"), get(0, "writes")), (3, 2));
    assert!((runs[0]["hit_ratio"].as_f64().unwrap() - 0.2).abs() < 1e-12);
    // LRU, 100% of the working set = 3 blocks: only the 3 cold misses.
    assert_eq!(get(1, "capacity_blocks"), 3);
    assert_eq!(
        (get(1, "read_hits"), get(1, "write_hits"), get(1, "misses"), get(1, "evictions")),
        (1, 1, 3, 0)
    );
    assert!((runs[1]["percent_wss"].as_f64().unwrap() - 100.0).abs() < 1e-9);
    // FIFO, 2 blocks: a hit does not refresh a, so c evicts a and b then hits.
    assert_eq!(runs[2]["policy"], "fifo");
    assert_eq!(
        (get(2, "read_hits"), get(2, "write_hits"), get(2, "misses"), get(2, "evictions")),
        (1, 1, 3, 1)
    );

    // Timeline of 2 s intervals: requests at 0,1 | 2,3 | 4 s.
    let tl = runs[0]["timeline"].as_array().unwrap();
    assert_eq!(tl.len(), 3);
    assert_eq!(
        tl.iter().map(|i| i["requests"].as_u64().unwrap()).collect::<Vec<_>>(),
        vec![2, 2, 1]
    );
    assert_eq!(tl.iter().map(|i| i["misses"].as_u64().unwrap()).sum::<u64>(), 4);
    assert_eq!(tl[2]["start_s"].as_f64().unwrap(), 4.0);

    let csv = std::fs::read_to_string(out.join("sim.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[0].starts_with("policy,admission,size,capacity_blocks,"));
    assert!(lines[3].starts_with("fifo,aod,2,2,8192,"), "{}", lines[3]);
    let tcsv = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    assert_eq!(tcsv.lines().count(), 1 + 4 * 3);
    for png in ["hit_ratio.png", "timeline.png"] {
        let bytes = std::fs::read(out.join(png)).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{png}");
    }
}

#[test]
fn explicit_paths_and_oracle_policy() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let json = dir.path().join("r.json");
    ember_ok(&cmdline("sim {} --format msr --policy opt --size 2 --json {} -q", &[&trace, &json]));
    let j = json_file(&json);
    // OPT, 2 blocks: a, b miss; a hits; c misses and evicts a (never used again), so b hits.
    let r = &j["runs"][0];
    assert_eq!(r["policy"], "opt");
    assert_eq!(
        (r["read_hits"].as_u64(), r["write_hits"].as_u64(), r["misses"].as_u64()),
        (Some(1), Some(1), Some(3))
    );
    assert!(r.get("timeline").is_none());
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let t = trace.to_str().unwrap();
    for (args, needle) in [
        (vec!["sim", t, "--format", "msr", "--policy", "nosuch"], "nosuch"),
        (vec!["sim", t, "--format", "msr", "--size", "12parsecs"], "12parsecs"),
        (vec!["sim", t, "--format", "msr", "--interval", "0s"], "0s"),
        (vec!["sim", "/nonexistent/trace.csv", "--format", "msr"], "nonexistent"),
    ] {
        let err = ember_fails(&args);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
