//! `ember warmup run` and `ember warmup sweep` stream a regular trace file: a
//! census pass (first time, each volume's working set and time order), then one pass per
//! experiment run running every volume's caches and selectors at once, so memory is their
//! state, not the trace. 4 million generated requests over two volumes and 2.3 days (MSR CSV,
//! 200 MB; the whole-trace path holds 32 bytes a request plus 24 a block access) run under an
//! address-space limit (`ulimit -v`) of 64 MiB with the same JSON as the whole-trace path:
//! the same file through a pipe, which `ember warmup` reads into memory, unlimited. The pipe
//! under the limit dies (the negative control: holding the trace does not fit).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::{ember_ok, ember_on_trace, gen_trace, json_file, TWO_CLIENTS_4M};
use std::path::Path;

/// Address space allowed to the limited runs, in KiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// `ember warmup ARGS` on `trace` (through a pipe if `piped`), under the limit if `limited`,
/// writing `--json json`; returns (success, stderr).
fn warmup(args: &str, trace: &Path, json: &Path, piped: bool, limited: bool) -> (bool, String) {
    let line = format!("warmup {args} {{}} --format msr --period 6h --interval 30m --json {{}}");
    let o = ember_on_trace(&line, trace, &[json], piped, limited.then_some(LIMIT_KIB));
    (o.success(), o.stderr)
}

/// Two clients (volumes), Zipf 0.9 over 20,000 blocks each, 10 % writes, 10 requests a
/// second per client: 4 M requests over 200,000 s, 9 periods of 6 h.
fn generate(dir: &Path) -> std::path::PathBuf {
    let trace = dir.join("two.csv");
    gen_trace(&format!("{TWO_CLIENTS_4M} --rate 10"), &trace);
    trace
}

#[test]
fn warmup_run_and_sweep_stream_four_million_requests_under_64_mib_with_the_whole_trace_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = generate(dir.path());

    // `run`: every scheme on every period of both volumes.
    let limited = dir.path().join("run_limited.json");
    let (ok, err) = warmup("run -q", &trace, &limited, false, true);
    assert!(ok, "the streamed run failed under ulimit -v {LIMIT_KIB}: {err}");
    let piped = dir.path().join("run_piped.json");
    let (ok, err) = warmup("run -q", &trace, &piped, true, false);
    assert!(ok, "the whole-trace run failed: {err}");
    let (a, b) = (json_file(&limited), json_file(&piped));
    let periods = a["periods"].as_array().expect("periods");
    // Periods 1 to 9 of each volume (period 9 is the last 3,200 s).
    assert_eq!(periods.len(), 18, "both volumes' periods after the first");
    let warm = &periods[0]["runs"]["runs"][0];
    assert_eq!(warm["scheme"], "always-warm");
    let reads: u64 = warm["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .map(|p| p["reads"].as_u64().unwrap_or(0))
        .sum();
    assert!(reads > 150_000, "a 6-hour period of one client read {reads} blocks");
    assert_eq!(a, b, "the streamed and whole-trace `warmup run` documents differ");

    // `sweep`: two configurations, a pass each.
    let grid = "sweep --cache 25,50 --warmup 10 --region 1MiB --th-v 0.9 --th-n 0.05";
    let limited = dir.path().join("sweep_limited.json");
    let (ok, err) = warmup(grid, &trace, &limited, false, true);
    assert!(ok, "the streamed sweep failed under ulimit -v {LIMIT_KIB}: {err}");
    let piped = dir.path().join("sweep_piped.json");
    let (ok, err) = warmup(grid, &trace, &piped, true, false);
    assert!(ok, "the whole-trace sweep failed: {err}");
    let (a, b) = (json_file(&limited), json_file(&piped));
    let rows = a.as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["samples"], 18);
    assert_eq!(a, b, "the streamed and whole-trace `warmup sweep` tables differ");

    let control = dir.path().join("control.json");
    let (ok, _) = warmup("run -q", &trace, &control, true, true);
    assert!(
        !ok,
        "the whole-trace path passed under ulimit -v {LIMIT_KIB}: the limit proves nothing"
    );
}

/// A trace whose volume goes back in time is held and sorted, as before: the streamed
/// experiment would see its periods out of order.
#[test]
fn a_trace_out_of_time_order_gives_the_sorted_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = 3_600u64 * 10_000_000; // an hour in MSR's 100 ns ticks
    let line =
        |t: u64, b: u64| format!("{},v,0,Read,{},4096,0\n", 116_444_736_000_000_000 + t, b * 4096);
    let mut sorted = String::new();
    let mut shuffled = Vec::new();
    for i in 0..3000u64 {
        let t = i * (3 * h / 3000);
        let b = (i * 7919) % 400;
        sorted.push_str(&line(t, b));
        shuffled.push(line(t, b));
    }
    // Swap adjacent pairs across the file: out of order, the same accesses.
    for i in (0..shuffled.len() - 1).step_by(2) {
        shuffled.swap(i, i + 1);
    }
    let (s, u) = (dir.path().join("sorted.csv"), dir.path().join("unsorted.csv"));
    std::fs::write(&s, sorted).expect("write");
    std::fs::write(&u, shuffled.concat()).expect("write");
    let run = |p: &Path, out: &Path| {
        let line = "warmup run {} --format msr --period 1h --interval 10m -q --json {}";
        ember_ok(&ember_testkit::cmdline(line, &[p, out]));
        json_file(out)
    };
    let a = run(&s, &dir.path().join("a.json"));
    let b = run(&u, &dir.path().join("b.json"));
    assert_eq!(a["periods"].as_array().map(Vec::len), Some(2));
    assert_eq!(a, b);
}
