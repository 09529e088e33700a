//! `ember sim` streams a trace in bounded memory: a generator-backed trace of 20
//! million requests, written by `ember trace gen` into a FIFO and never stored, is simulated
//! under an address-space limit (`ulimit -v`) of 64 MiB. Holding the trace as block accesses
//! (keys and flags, 9 bytes each; 17 with OPT's next-access times) needs 180 MB for it (340
//! MB with OPT), so a whole-trace design cannot pass.
//!
//! - Non-oracle policies (LRU, S3-FIFO) stream chunk by chunk.
//! - OPT needs the future: its next-access times come from a streaming pass through
//!   temporary files (`ember_trace::Spool`), so a grid with OPT fits the same limit too.
//! - Negative control: the whole-trace path, still reachable with `EMBER_SIM_WHOLE_TRACE=1`,
//!   dies under the same limit.
//! - Reference: that whole-trace path, unlimited, on the same generated trace: the limited
//!   runs' LRU and OPT misses must equal it exactly.
//!
//! - The full length: 200 million generated requests (1.8 GB as block accesses) stream
//!   under the same limit, with a timeline every 20 million requests; the first interval's
//!   misses equal an unlimited whole-trace run on the 20-million-request prefix (the generator
//!   writes the same requests for the same seed whatever the length).
//!
//! `ember trace gen` writes oracleGeneral (whose records carry next-access times) in bounded
//! memory too: 10 million requests under the same limit, byte for byte what the whole-trace
//! writer (`ember trace convert` on a pipe, which holds the trace) makes of the same trace
//! unlimited,
//! and dies making under the limit (the negative control).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::{cmdline, ember_cmd, ember_limited, ember_limited_cmd, ember_on_trace};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const EMBER: &str = env!("CARGO_BIN_EXE_ember");
const REQUESTS: u64 = 20_000_000;
/// Address space allowed to the limited `ember sim`, in KiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// Start `ember trace gen zipf` writing `REQUESTS` requests into the FIFO `fifo` (it blocks
/// until read).
fn generate(fifo: &Path) -> Child {
    generate_n(fifo, REQUESTS)
}

/// Start `ember trace gen zipf` writing `requests` requests into the FIFO `fifo`.
fn generate_n(fifo: &Path, requests: u64) -> Child {
    ember_cmd(&["trace", "gen"])
        .args(["zipf", "--alpha", "0.9", "--blocks", "200000", "--requests"])
        .arg(requests.to_string())
        .args(["--seed", "7", "-o"])
        .arg(fifo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ember trace gen")
}

/// Run `ember sim` on the FIFO, under `ulimit -v limit_kib` if given, through the
/// whole-trace path if `whole`; returns (success, JSON report or stderr).
fn sim(fifo: &Path, policies: &str, limit_kib: Option<u64>, whole: bool) -> (bool, String) {
    let mut gen = generate(fifo);
    let line =
        format!("sim {{}} --threads 1 --policy {policies} --size 2000 -q --json /dev/stdout");
    let out = ember_limited_cmd(&cmdline(&line, &[fifo]), limit_kib)
        .env("EMBER_SIM_WHOLE_TRACE", if whole { "1" } else { "0" })
        .output()
        .expect("run ember sim");
    // If sim died early the generator gets EPIPE and exits; either way reap it.
    let _ = gen.kill();
    let _ = gen.wait();
    let ok = out.status.success();
    let text = if ok { out.stdout } else { out.stderr };
    (ok, String::from_utf8_lossy(&text).into_owned())
}

fn misses(report: &str, policy: &str) -> u64 {
    let json = &report[report.find('{').expect("JSON in the output")..];
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON report");
    assert_eq!(v["requests"].as_u64(), Some(REQUESTS), "{report}");
    let runs = v["runs"].as_array().expect("runs");
    let run = runs.iter().find(|r| r["policy"] == policy).expect("a run of the policy");
    run["misses"].as_u64().expect("misses")
}

#[test]
fn twenty_million_requests_stream_under_a_64_mib_address_space_with_exact_misses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("zipf.ember");
    ember_testkit::mkfifo(&fifo);

    let (ok, limited) = sim(&fifo, "lru,s3fifo", Some(LIMIT_KIB), false);
    assert!(ok, "streamed ember sim failed under ulimit -v {LIMIT_KIB}: {limited}");
    let streamed = misses(&limited, "lru");

    // OPT's future through temporary files: the same limit holds.
    let (ok, limited_opt) = sim(&fifo, "lru,opt", Some(LIMIT_KIB), false);
    assert!(ok, "ember sim with OPT failed under ulimit -v {LIMIT_KIB}: {limited_opt}");

    // Negative control: the whole-trace path cannot run in this limit.
    let (ok, err) = sim(&fifo, "lru,opt", Some(LIMIT_KIB), true);
    assert!(!ok, "a whole-trace run fit in {LIMIT_KIB} KiB, so the limit proves nothing");
    assert!(!err.is_empty());

    // Reference: the same trace, unlimited, through the whole-trace path.
    let (ok, whole) = sim(&fifo, "lru,opt", None, true);
    assert!(ok, "unlimited run failed: {whole}");
    assert_eq!(streamed, misses(&whole, "lru"));
    assert_eq!(misses(&limited_opt, "lru"), streamed);
    let opt = misses(&limited_opt, "opt");
    assert_eq!(opt, misses(&whole, "opt"));
    assert!(streamed > REQUESTS / 10 && streamed < REQUESTS, "{streamed}");
    assert!(opt < streamed, "OPT {opt} must miss less than LRU {streamed}");
}

/// The bound: "a generator-backed trace of 200 M requests through `ember sim` under an
/// address-space limit that a whole-trace design exceeds, with the same misses as an
/// unlimited run on a shorter prefix".
#[test]
fn two_hundred_million_requests_stream_under_a_64_mib_address_space_and_match_the_prefix() {
    const LONG: u64 = 200_000_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("zipf.ember");
    ember_testkit::mkfifo(&fifo);

    let mut gen = generate_n(&fifo, LONG);
    let cmd = format!(
        "ulimit -v {LIMIT_KIB} && exec \"$0\" sim \"$1\" --threads 1 --policy lru --size 2000 \
         -q --interval {REQUESTS}req --json /dev/stdout"
    );
    let out = Command::new("bash")
        .args(["-c", &cmd, EMBER])
        .arg(&fifo)
        .env("EMBER_SIM_WHOLE_TRACE", "0")
        .output()
        .expect("run ember sim");
    let _ = gen.kill();
    let _ = gen.wait();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "200 M requests did not stream under ulimit -v {LIMIT_KIB}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = &report[report.find('{').expect("JSON in the output")..];
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON report");
    assert_eq!(v["requests"].as_u64(), Some(LONG), "every request was read");
    let run = &v["runs"][0];
    let timeline = run["timeline"].as_array().expect("a timeline");
    assert_eq!(timeline.len() as u64, LONG / REQUESTS, "one interval per 20 M requests");
    let sum: u64 = timeline.iter().map(|i| i["misses"].as_u64().expect("misses")).sum();
    assert_eq!(sum, run["misses"].as_u64().expect("misses"), "intervals add up to the run");
    let first = timeline[0]["misses"].as_u64().expect("misses");

    // Reference: the 20 M prefix (same seed), unlimited, through the whole-trace path.
    let (ok, whole) = sim(&fifo, "lru", None, true);
    assert!(ok, "unlimited prefix run failed: {whole}");
    assert_eq!(first, misses(&whole, "lru"), "the first interval differs from the prefix run");
}

/// Run `ember ARGS...` under `ulimit -v limit_kib` if given; returns (success, stderr).
fn ember<S: AsRef<std::ffi::OsStr>>(args: &[S], limit_kib: Option<u64>) -> (bool, String) {
    let o = ember_limited(args, limit_kib);
    (o.success(), o.stderr)
}

#[test]
fn trace_gen_writes_ten_million_oracle_general_records_under_a_64_mib_address_space() {
    const N: u64 = 10_000_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let p = |name: &str| dir.path().join(name);
    let gen = |out: &Path| -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> =
            ["trace", "gen", "zipf", "--alpha", "0.9", "--blocks", "300000", "--seed", "11"]
                .iter()
                .map(Into::into)
                .collect();
        a.extend(["--requests".into(), N.to_string().into(), "-o".into(), out.into()]);
        a
    };

    let limited = p("limited.oracleGeneral.bin");
    let (ok, err) = ember(&gen(&limited), Some(LIMIT_KIB));
    assert!(ok, "trace gen to oracleGeneral failed under ulimit -v {LIMIT_KIB}: {err}");
    let len = std::fs::metadata(&limited).expect("output").len();
    assert_eq!(len, N * 24, "one 24-byte record per request");

    // Reference: the same trace in ember's format (streamed), converted by the whole-trace
    // oracleGeneral writer with no limit.
    let ember_trace = p("same.ember");
    let (ok, err) = ember(&gen(&ember_trace), Some(LIMIT_KIB));
    assert!(ok, "{err}");
    let whole = p("whole.oracleGeneral.bin");
    // Through a pipe, `ember trace convert` reads the whole trace into memory (a regular file
    // streams: convert_bounded.rs).
    let convert = |limit: Option<u64>| -> bool {
        let line = "trace convert {} {} --format ember";
        ember_on_trace(line, &ember_trace, &[&whole], true, limit).success()
    };
    assert!(convert(None), "the in-memory convert failed");
    let (a, b) = (std::fs::read(&limited).expect("read"), std::fs::read(&whole).expect("read"));
    assert!(a == b, "streamed oracleGeneral differs from the whole-trace writer's");
    // Next-access times are in the records: some access has a next one.
    let nexts = a.chunks_exact(24).filter(|r| r[16..24] != (-1i64).to_le_bytes()).count();
    assert!(nexts as u64 > N / 2 && (nexts as u64) < N, "{nexts}");

    // Negative control: the whole-trace writer cannot run in this limit.
    assert!(
        !convert(Some(LIMIT_KIB)),
        "the whole-trace writer fit in {LIMIT_KIB} KiB, so the limit proves nothing"
    );
}

/// With OPT, the first pass (to temporary files) counts the working set, so sizes in % work on
/// a FIFO too, with the results of the same trace read from a regular file; an unusable
/// TMPDIR is a clear error.
#[test]
fn opt_takes_percent_sizes_from_a_fifo_and_names_a_bad_tmpdir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("z.ember");
    let fifo = dir.path().join("f.ember");
    let gen_args = ["--alpha", "0.8", "--blocks", "20000", "--requests", "300000", "--seed", "3"];
    let made = Command::new(EMBER)
        .args(["trace", "gen", "zipf"])
        .args(gen_args)
        .arg("-o")
        .arg(&file)
        .output()
        .expect("gen");
    assert!(made.status.success());
    ember_testkit::mkfifo(&fifo);
    let run = |trace: &Path, tmp: Option<&Path>| {
        let mut c = Command::new(EMBER);
        c.arg("sim").arg(trace).args(["--policy", "opt,lru", "--size", "1%,10%", "-q"]);
        c.args(["--json", "/dev/stdout"]);
        if let Some(t) = tmp {
            c.env("TMPDIR", t);
        }
        c.output().expect("sim")
    };
    let mut writer = Command::new(EMBER)
        .args(["trace", "gen", "zipf"])
        .args(gen_args)
        .arg("-o")
        .arg(&fifo)
        .stdout(Stdio::null())
        .spawn()
        .expect("gen into the FIFO");
    let from_fifo = run(&fifo, None);
    let _ = writer.wait();
    let from_file = run(&file, None);
    assert!(from_fifo.status.success(), "{}", String::from_utf8_lossy(&from_fifo.stderr));
    assert!(from_file.status.success());
    let json = |o: &std::process::Output| {
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        let v: serde_json::Value = serde_json::from_str(&t[t.find('{').expect("JSON")..]).unwrap();
        v["runs"].as_array().expect("runs").iter().map(|r| r["misses"].as_u64()).collect::<Vec<_>>()
    };
    let (a, b) = (json(&from_fifo), json(&from_file));
    assert_eq!(a, b);
    assert_eq!(a.len(), 4);
    assert!(a[0] < a[2] && a[1] < a[3], "OPT beats LRU at 1 % and 10 %: {a:?}");

    let missing = dir.path().join("no-such-dir");
    let bad = run(&file, Some(&missing));
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("temporary files for OPT") && err.contains("no-such-dir"), "{err}");
}
