//! `ember demote` streams a regular trace file (issue 17): a counting pass (requests, volumes,
//! the working set), a pass for the `wss` warm-up, then one pass per hierarchy run, so memory
//! is the caches' state and the working set's block set, not the trace. 4 million generated
//! requests as MSR CSV (128 MB held in memory, 32 bytes a request) run every scheme under an
//! address-space limit (`ulimit -v`) of 96 MiB, one thread, with the same `demote.json`
//! (every counter of every scheme) as the whole-trace path: the same file through a pipe,
//! which `ember demote` reads into memory, unlimited. The pipe under the limit dies (the
//! negative control: the limit is tight enough that holding the trace fails).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;
use std::process::Command;

const EMBER: &str = env!("CARGO_BIN_EXE_ember");
/// Address space allowed to the limited runs, in KiB.
const LIMIT_KIB: u64 = 96 * 1024;

/// `ember demote` on `input` (a path, or `/dev/stdin` for the file at `stdin_from` through a pipe),
/// under the limit if `limited`, writing `json`; returns (success, stderr).
fn demote(input: &str, stdin_from: &Path, json: &Path, limited: bool) -> (bool, String) {
    // `cat FILE |` makes stdin a pipe (a redirection would make /dev/stdin the file itself).
    let cmd = format!(
        "cat \"$3\" | {{ {}exec \"$0\" demote \"$1\" --format msr --client-size 2000 \
         --array-size 4000 --threads 1 -q --json \"$2\"; }}",
        if limited { format!("ulimit -v {LIMIT_KIB} && ") } else { String::new() }
    );
    let out = Command::new("bash")
        .args(["-c", &cmd, EMBER, input])
        .arg(json)
        .arg(stdin_from)
        .output()
        .expect("run ember demote");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The report without the run times (wall and CPU seconds differ from run to run).
fn counters(json: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(json).expect("demote.json");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
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
    let gen = Command::new(EMBER)
        .args(["trace", "gen", "multi-client", "--clients", "2", "--blocks-per-client", "20000"])
        .args(["--pattern", "zipf", "--alpha", "0.9", "--warmup-per-client", "100000"])
        .args(["--timed-per-client", "1900000", "--write-ratio", "0.1", "--seed", "3"])
        .args(["--format", "msr", "-o"])
        .arg(&trace)
        .output()
        .expect("ember trace gen");
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));

    let limited = dir.path().join("limited.json");
    let (ok, err) = demote(trace.to_str().expect("utf-8"), &trace, &limited, true);
    assert!(ok, "the streamed run failed under ulimit -v {LIMIT_KIB}: {err}");

    let piped = dir.path().join("piped.json");
    let (ok, err) = demote("/dev/stdin", &trace, &piped, false);
    assert!(ok, "the whole-trace run failed: {err}");
    let (a, b) = (counters(&limited), counters(&piped));
    let schemes = a["schemes"].as_array().expect("schemes");
    assert_eq!(schemes.len(), 6, "every scheme ran");
    let reads = schemes[0]["result"]["clients"][0]["reads"].as_u64().expect("reads");
    assert!(reads > 1_000_000, "client 0 counted {reads} READ blocks");
    assert_eq!(a, b, "the streamed and whole-trace reports differ");

    let control = dir.path().join("control.json");
    let (ok, _) = demote("/dev/stdin", &trace, &control, true);
    assert!(
        !ok,
        "the whole-trace path passed under ulimit -v {LIMIT_KIB}: the limit proves nothing"
    );
}
