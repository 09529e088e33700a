//! `ember analyze` and `ember warmup advise` stream a regular trace file (issue 17): a census
//! pass (each volume's block range and accesses), then one analysis pass feeding the whole
//! trace's analyses and each volume's at once, so memory is per distinct block, not per
//! request. 4 million generated requests over two volumes (MSR CSV, 200 MB; the whole-trace
//! path holds 32 bytes a request plus 17 a block access) run under an address-space limit
//! (`ulimit -v`) of 64 MiB with the same output as the whole-trace path: the same file
//! through a pipe, which is read into memory, unlimited. The pipe under the limit dies (the
//! negative control).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;
use std::process::Command;

const EMBER: &str = env!("CARGO_BIN_EXE_ember");
/// Address space allowed to the limited runs, in KiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// `ember ARGS` with the trace `input` (a path, or `/dev/stdin` for the file at `stdin_from`
/// through a pipe) in place of `TRACE`, under the limit if `limited`; returns (success,
/// stdout, stderr).
fn ember(args: &str, input: &str, stdin_from: &Path, limited: bool) -> (bool, String, String) {
    // `cat FILE |` makes stdin a pipe (a redirection would make /dev/stdin the file itself).
    let cmd = format!(
        "cat \"$2\" | {{ {}exec \"$0\" {}; }}",
        if limited { format!("ulimit -v {LIMIT_KIB} && ") } else { String::new() },
        args.replace("TRACE", "\"$1\"")
    );
    let out = Command::new("bash")
        .args(["-c", &cmd, EMBER, input])
        .arg(stdin_from)
        .output()
        .expect("run ember");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("the JSON")).expect("JSON")
}

#[test]
fn analyze_and_advise_stream_four_million_requests_under_64_mib_with_the_whole_trace_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("two.csv");
    // Two clients (volumes), Zipf 0.9 over 20,000 blocks each, 10 % writes, 10 requests a
    // second per client: 4 M requests over 2.3 days.
    let gen = Command::new(EMBER)
        .args(["trace", "gen", "multi-client", "--clients", "2", "--blocks-per-client", "20000"])
        .args(["--pattern", "zipf", "--alpha", "0.9", "--warmup-per-client", "100000"])
        .args(["--timed-per-client", "1900000", "--write-ratio", "0.1", "--seed", "3"])
        .args(["--rate", "10", "--format", "msr", "-o"])
        .arg(&trace)
        .output()
        .expect("ember trace gen");
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let path = trace.to_str().expect("utf-8");

    // Every analysis, exact reuse distances and SHARDS beside them.
    let (limited, piped) = (dir.path().join("limited.json"), dir.path().join("piped.json"));
    let args = |out: &Path| {
        format!("analyze TRACE --format msr --shards 0.1 --bins 1000 -q --json {}", out.display())
    };
    let (ok, _, err) = ember(&args(&limited), path, &trace, true);
    assert!(ok, "the streamed analysis failed under ulimit -v {LIMIT_KIB}: {err}");
    let (ok, _, err) = ember(&args(&piped), "/dev/stdin", &trace, false);
    assert!(ok, "the whole-trace analysis failed: {err}");
    let (a, b) = (json(&limited), json(&piped));
    assert_eq!(a["volumes"].as_array().map(Vec::len), Some(2));
    assert_eq!(a["whole"]["summary"]["block_accesses"], 4_000_000);
    assert_eq!(a["whole"]["popularity"]["days"].as_array().map(Vec::len), Some(3));
    assert!(a["whole"]["reuse"]["distribution"].as_array().is_some_and(|d| d.len() > 1000));
    assert_eq!(a, b, "the streamed and whole-trace analyses differ");

    // `warmup advise`: the analysis, then every selector simulated (both stream).
    let advise = "warmup advise TRACE --format msr --period 6h --interval 30m";
    let (ok, limited, err) = ember(advise, path, &trace, true);
    assert!(ok, "the streamed advice failed under ulimit -v {LIMIT_KIB}: {err}");
    let (ok, piped, err) = ember(advise, "/dev/stdin", &trace, false);
    assert!(ok, "the whole-trace advice failed: {err}");
    assert!(limited.contains("medians over 18 volume-periods"), "{limited}");
    assert_eq!(limited, piped);

    let control = dir.path().join("control.json");
    let (ok, _, _) = ember(&args(&control), "/dev/stdin", &trace, true);
    assert!(
        !ok,
        "the whole-trace path passed under ulimit -v {LIMIT_KIB}: the limit proves nothing"
    );
}
