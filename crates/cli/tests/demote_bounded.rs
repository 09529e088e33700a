//! `ember demote` streams a regular trace file: a counting pass (requests, volumes,
//! the working set), a pass for the `wss` warm-up, then one pass per hierarchy run, so memory
//! is the caches' state and the working set's block set, not the trace. 4 million generated
//! requests as MSR CSV (128 MB held in memory, 32 bytes a request) run every scheme under an
//! address-space limit (`ulimit -v`) of 96 MiB, one thread, with the same `demote.json`
//! (every counter of every scheme) as the whole-trace path: the same file through a pipe,
//! which `ember demote` reads into memory, unlimited. The pipe under the limit dies (the
//! negative control: the limit is tight enough that holding the trace fails).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::{ember_on_trace, gen_trace, json_file, TWO_CLIENTS_4M};
use std::path::Path;

/// Address space allowed to the limited runs, in KiB.
const LIMIT_KIB: u64 = 96 * 1024;

/// `ember demote` on `trace` (through a pipe if `piped`), under the limit if `limited`,
/// writing `json`; returns (success, stderr).
fn demote(trace: &Path, json: &Path, piped: bool, limited: bool) -> (bool, String) {
    let line = "demote {} --format msr --client-size 2000 --array-size 4000 --threads 1 -q \
                --json {}";
    let o = ember_on_trace(line, trace, &[json], piped, limited.then_some(LIMIT_KIB));
    (o.success(), o.stderr)
}

/// The report without the run times (wall and CPU seconds differ from run to run).
fn counters(json: &Path) -> serde_json::Value {
    let mut v = json_file(json);
    for s in v["schemes"].as_array_mut().expect("schemes") {
        let s = s.as_object_mut().expect("a scheme");
        s.remove("run_seconds");
        s.remove("run_cpu_seconds");
    }
    v
}

#[test]
fn demote_streams_four_million_requests_under_96_mib_with_the_whole_trace_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("two.csv");
    gen_trace(TWO_CLIENTS_4M, &trace);

    let limited = dir.path().join("limited.json");
    let (ok, err) = demote(&trace, &limited, false, true);
    assert!(ok, "the streamed run failed under ulimit -v {LIMIT_KIB}: {err}");

    let piped = dir.path().join("piped.json");
    let (ok, err) = demote(&trace, &piped, true, false);
    assert!(ok, "the whole-trace run failed: {err}");
    let (a, b) = (counters(&limited), counters(&piped));
    let schemes = a["schemes"].as_array().expect("schemes");
    assert_eq!(schemes.len(), 6, "every scheme ran");
    let reads = schemes[0]["result"]["clients"][0]["reads"].as_u64().expect("reads");
    assert!(reads > 1_000_000, "client 0 counted {reads} READ blocks");
    assert_eq!(a, b, "the streamed and whole-trace reports differ");

    let control = dir.path().join("control.json");
    let (ok, _) = demote(&trace, &control, true, true);
    assert!(
        !ok,
        "the whole-trace path passed under ulimit -v {LIMIT_KIB}: the limit proves nothing"
    );
}
