//! `ember sim` runs a grid of LRU, FIFO, CLOCK and S3-FIFO cells over one shared index
//! (ember_sim::core::grid_shared); every cell must equal the same cell run alone (the per-policy
//! implementations, the reference), on several traces, formats and size sets.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::trace::MsrRow;
use ember_testkit::{cmdline, ember_ok, json_file, write_msr_trace, MSR_T0};
use std::path::{Path, PathBuf};

/// The JSON report of `ember sim` on `trace` with extra `args`; and its stderr.
fn sim(trace: &Path, args: &[&str]) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("sim.json");
    let mut all = vec!["sim", trace.to_str().expect("path"), "--json", json.to_str().expect("p")];
    all.extend_from_slice(args);
    let o = ember_ok(&all);
    (json_file(&json), o.stderr)
}

/// An MSR-Cambridge CSV of `n` requests with writes and requests over 1-3 blocks, some not
/// block-aligned (a pseudo-random skewed pattern over `blocks` blocks).
fn msr_trace(dir: &Path, n: u64, blocks: u64) -> PathBuf {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let rows: Vec<MsrRow> = (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b =
                if x.is_multiple_of(3) { (x >> 8) % blocks } else { (x >> 8) % (blocks / 8 + 1) };
            let (off, len) = match (x >> 40) % 6 {
                0 => (b * 4096 + 512, 4096),
                1 => (b * 4096, 12288),
                _ => (b * 4096, 4096),
            };
            (MSR_T0 + i, (x >> 30).is_multiple_of(4), off, len)
        })
        .collect();
    write_msr_trace(dir, &rows)
}

/// Every cell of the grid run equals its single run, all counters.
fn check_grid(trace: &Path, extra: &[&str], sizes: &[&str]) {
    let policies = ["lru", "fifo", "clock", "s3fifo"];
    let size_list = sizes.join(",");
    let mut args = vec!["--threads", "1", "--policy", "lru,fifo,clock,s3fifo", "--size"];
    args.push(&size_list);
    args.extend_from_slice(extra);
    let (grid, stderr) = sim(trace, &args);
    assert!(stderr.contains("over one shared index"), "the shared grid did not run: {stderr}");
    let runs = grid["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), policies.len() * sizes.len());
    let mut misses_differ = false;
    for (i, p) in policies.iter().enumerate() {
        for (j, s) in sizes.iter().enumerate() {
            let mut a = vec!["--threads", "1", "--policy", p, "--size", s];
            a.extend_from_slice(extra);
            let (single, stderr) = sim(trace, &a);
            assert!(!stderr.contains("shared index"), "{stderr}");
            let want = &single["runs"][0];
            let got = &runs[i * sizes.len() + j];
            assert_eq!(got, want, "{} {p} at {s}", trace.display());
            misses_differ |= got["misses"] != runs[j]["misses"];
        }
        assert_eq!(grid["wss_blocks"], sim(trace, &["--policy", p, "--size", "1"]).0["wss_blocks"]);
    }
    assert!(misses_differ, "every policy gave LRU's misses: the test would not tell them apart");
}

#[test]
fn grid_cells_equal_single_runs_on_oracle_general_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = dir.path().join("z.oracleGeneral.bin");
    let gen = "trace gen zipf --alpha 0.9 --blocks 20000 --requests 150000 --seed 7 -o {}";
    ember_ok(&cmdline(gen, &[&t]));
    check_grid(&t, &[], &["0.5%", "1%", "5%", "10%"]);
    check_grid(&t, &[], &["100", "1", "30000", "2000", "2000"]);
}

#[test]
fn grid_cells_equal_single_runs_on_chunks_with_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = dir.path().join("w.csv");
    let gen = "trace gen zipf --alpha 0.7 --blocks 5000 --requests 80000 --write-ratio 0.3 \
               --seed 3 -o {}";
    ember_ok(&cmdline(gen, &[&t]));
    check_grid(&t, &["--format", "msr"], &["1%", "7%", "20%", "60%"]);
    let msr = msr_trace(dir.path(), 40_000, 3000);
    check_grid(&msr, &["--format", "msr"], &["10", "3", "250", "1200", "5000"]);
}

/// Grids the shared index does not model take the per-cell path.
#[test]
fn other_grids_take_the_per_cell_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let msr = msr_trace(dir.path(), 5_000, 500);
    for extra in [
        vec!["--policy", "lru,arc", "--size", "10,50"],
        vec!["--policy", "lru,fifo", "--size", "10,50", "--interval", "1000req"],
        vec!["--policy", "lru", "--size", "10"],
    ] {
        let mut a = vec!["--format", "msr"];
        a.extend_from_slice(&extra);
        let (j, stderr) = sim(&msr, &a);
        assert!(!stderr.contains("shared index"), "{extra:?}: {stderr}");
        assert!(j["runs"][0]["misses"].as_u64().expect("misses") > 0);
    }
}

/// A FIFO-only grid: FIFO lets go of keys without touching their entries, so every entry is
/// freed by sweeps of the slab; over a trace of many more blocks than the cells hold (the slab
/// is swept many times), every cell still equals its single run. (`ember sim` refuses size 0;
/// the unit tests in `crates/sim/src/grid_shared/tests.rs` cover it.)
#[test]
fn fifo_grid_swept_many_times_equals_single_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = dir.path().join("s.oracleGeneral.bin");
    let gen = "trace gen zipf --alpha 0.6 --blocks 400000 --requests 600000 --seed 11 -o {}";
    ember_ok(&cmdline(gen, &[&t]));
    let sizes = ["1", "64", "3000"];
    let (grid, stderr) =
        sim(&t, &["--threads", "1", "--policy", "fifo", "--size", &sizes.join(",")]);
    assert!(stderr.contains("over one shared index"), "the shared grid did not run: {stderr}");
    let runs = grid["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), sizes.len());
    for (got, s) in runs.iter().zip(sizes) {
        let (single, _) = sim(&t, &["--threads", "1", "--policy", "fifo", "--size", s]);
        assert_eq!(got, &single["runs"][0], "fifo at {s}");
    }
    assert!(grid["wss_blocks"].as_u64().expect("wss") > 200_000, "{}", grid["wss_blocks"]);
    assert!(runs[2]["misses"].as_u64() < runs[1]["misses"].as_u64());
}
