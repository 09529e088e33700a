//! `ember warmup run` and `ember warmup sweep` stream a regular trace file (issue 17): a
//! census pass (first time, each volume's working set and time order), then one pass per
//! experiment run running every volume's caches and selectors at once, so memory is their
//! state, not the trace. 4 million generated requests over two volumes and 2.3 days (MSR CSV,
//! 200 MB; the whole-trace path holds 32 bytes a request plus 24 a block access) run under an
//! address-space limit (`ulimit -v`) of 64 MiB with the same JSON as the whole-trace path:
//! the same file through a pipe, which `ember warmup` reads into memory, unlimited. The pipe
//! under the limit dies (the negative control: holding the trace does not fit).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;
use std::process::Command;

const EMBER: &str = env!("CARGO_BIN_EXE_ember");
/// Address space allowed to the limited runs, in KiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// `ember warmup ARGS` on `input` (a path, or `/dev/stdin` for the file at `stdin_from`
/// through a pipe), under the limit if `limited`, writing `--json json`; returns (success,
/// stderr).
fn warmup(
    args: &str,
    input: &str,
    stdin_from: &Path,
    json: &Path,
    limited: bool,
) -> (bool, String) {
    // `cat FILE |` makes stdin a pipe (a redirection would make /dev/stdin the file itself).
    let cmd = format!(
        "cat \"$3\" | {{ {}exec \"$0\" warmup {args} \"$1\" --format msr --period 6h \
         --interval 30m --json \"$2\" > /dev/null; }}",
        if limited { format!("ulimit -v {LIMIT_KIB} && ") } else { String::new() }
    );
    let out = Command::new("bash")
        .args(["-c", &cmd, EMBER, input])
        .arg(json)
        .arg(stdin_from)
        .output()
        .expect("run ember warmup");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("the JSON")).expect("JSON")
}

/// Two clients (volumes), Zipf 0.9 over 20,000 blocks each, 10 % writes, 10 requests a
/// second per client: 4 M requests over 200,000 s, 9 periods of 6 h.
fn generate(dir: &Path) -> std::path::PathBuf {
    let trace = dir.join("two.csv");
    let gen = Command::new(EMBER)
        .args(["trace", "gen", "multi-client", "--clients", "2", "--blocks-per-client", "20000"])
        .args(["--pattern", "zipf", "--alpha", "0.9", "--warmup-per-client", "100000"])
        .args(["--timed-per-client", "1900000", "--write-ratio", "0.1", "--seed", "3"])
        .args(["--rate", "10", "--format", "msr", "-o"])
        .arg(&trace)
        .output()
        .expect("ember trace gen");
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    trace
}

#[test]
fn warmup_run_and_sweep_stream_four_million_requests_under_64_mib_with_the_whole_trace_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = generate(dir.path());
    let path = trace.to_str().expect("utf-8");

    // `run`: every scheme on every period of both volumes.
    let limited = dir.path().join("run_limited.json");
    let (ok, err) = warmup("run -q", path, &trace, &limited, true);
    assert!(ok, "the streamed run failed under ulimit -v {LIMIT_KIB}: {err}");
    let piped = dir.path().join("run_piped.json");
    let (ok, err) = warmup("run -q", "/dev/stdin", &trace, &piped, false);
    assert!(ok, "the whole-trace run failed: {err}");
    let (a, b) = (json(&limited), json(&piped));
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
    let (ok, err) = warmup(grid, path, &trace, &limited, true);
    assert!(ok, "the streamed sweep failed under ulimit -v {LIMIT_KIB}: {err}");
    let piped = dir.path().join("sweep_piped.json");
    let (ok, err) = warmup(grid, "/dev/stdin", &trace, &piped, false);
    assert!(ok, "the whole-trace sweep failed: {err}");
    let (a, b) = (json(&limited), json(&piped));
    let rows = a.as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["samples"], 18);
    assert_eq!(a, b, "the streamed and whole-trace `warmup sweep` tables differ");

    let control = dir.path().join("control.json");
    let (ok, _) = warmup("run -q", "/dev/stdin", &trace, &control, true);
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
        let o = Command::new(EMBER)
            .args(["warmup", "run"])
            .arg(p)
            .args(["--format", "msr", "--period", "1h", "--interval", "10m", "-q", "--json"])
            .arg(out)
            .output()
            .expect("ember warmup run");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        json(out)
    };
    let a = run(&s, &dir.path().join("a.json"));
    let b = run(&u, &dir.path().join("b.json"));
    assert_eq!(a["periods"].as_array().map(Vec::len), Some(2));
    assert_eq!(a, b);
}
