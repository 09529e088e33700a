//! `ember analyze` and `ember warmup advise` stream a regular trace file: a census
//! pass (each volume's block range and accesses), then one analysis pass feeding the whole
//! trace's analyses and each volume's at once, so memory is per distinct block, not per
//! request. 4 million generated requests over two volumes (MSR CSV, 200 MB; the whole-trace
//! path holds 32 bytes a request plus 17 a block access) run under an address-space limit
//! (`ulimit -v`) of 64 MiB with the same output as the whole-trace path: the same file
//! through a pipe, which is read into memory, unlimited. The pipe under the limit dies (the
//! negative control).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::{ember_on_trace, gen_trace, json_file, Output, TWO_CLIENTS_4M};
use std::path::Path;

/// Address space allowed to the limited runs, in KiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// `ember LINE` on `trace` (the first `{}`; through a pipe if `piped`), then `out`; under the
/// limit if `limited`.
fn ember(line: &str, trace: &Path, out: &[&Path], piped: bool, limited: bool) -> Output {
    ember_on_trace(line, trace, out, piped, limited.then_some(LIMIT_KIB))
}

#[test]
fn analyze_and_advise_stream_four_million_requests_under_64_mib_with_the_whole_trace_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("two.csv");
    // Two clients (volumes), Zipf 0.9 over 20,000 blocks each, 10 % writes, 10 requests a
    // second per client: 4 M requests over 2.3 days.
    gen_trace(&format!("{TWO_CLIENTS_4M} --rate 10"), &trace);

    // Every analysis, exact reuse distances and SHARDS beside them.
    let (limited, piped) = (dir.path().join("limited.json"), dir.path().join("piped.json"));
    let args = "analyze {} --format msr --shards 0.1 --bins 1000 -q --json {}";
    let o = ember(args, &trace, &[&limited], false, true);
    assert!(o.success(), "the streamed analysis failed under ulimit -v {LIMIT_KIB}: {}", o.stderr);
    let o = ember(args, &trace, &[&piped], true, false);
    assert!(o.success(), "the whole-trace analysis failed: {}", o.stderr);
    let (a, b) = (json_file(&limited), json_file(&piped));
    assert_eq!(a["volumes"].as_array().map(Vec::len), Some(2));
    assert_eq!(a["whole"]["summary"]["block_accesses"], 4_000_000);
    assert_eq!(a["whole"]["popularity"]["days"].as_array().map(Vec::len), Some(3));
    assert!(a["whole"]["reuse"]["distribution"].as_array().is_some_and(|d| d.len() > 1000));
    assert_eq!(a, b, "the streamed and whole-trace analyses differ");

    // `warmup advise`: the analysis, then every selector simulated (both stream).
    let advise = "warmup advise {} --format msr --period 6h --interval 30m";
    let o = ember(advise, &trace, &[], false, true);
    assert!(o.success(), "the streamed advice failed under ulimit -v {LIMIT_KIB}: {}", o.stderr);
    let limited = o.stdout;
    let o = ember(advise, &trace, &[], true, false);
    assert!(o.success(), "the whole-trace advice failed: {}", o.stderr);
    let piped = o.stdout;
    assert!(limited.contains("medians over 18 volume-periods"), "{limited}");
    assert_eq!(limited, piped);

    let control = dir.path().join("control.json");
    assert!(
        !ember(args, &trace, &[&control], true, true).success(),
        "the whole-trace path passed under ulimit -v {LIMIT_KIB}: the limit proves nothing"
    );
}
