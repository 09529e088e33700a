//! `ember sim` streams a trace in bounded memory (issue 17): a generator-backed trace of 20
//! million requests, written by `ember trace gen` into a FIFO and never stored, is simulated
//! under an address-space limit (`ulimit -v`) of 64 MiB. Holding the trace as block accesses
//! (keys and flags, 9 bytes each, what `ember sim` did before and still does for OPT) needs
//! 180 MB for it, so a whole-trace design cannot pass; the negative control shows it: the
//! same command with OPT in the grid dies under the same limit. The limited run's LRU misses
//! must equal those of an unlimited whole-trace run (OPT in the grid makes `ember sim` hold
//! the trace, a different code path) on the same generated trace.

use std::path::Path;
use std::process::{Child, Command, Stdio};

const EMBER: &str = env!("CARGO_BIN_EXE_ember");
const REQUESTS: u64 = 20_000_000;
/// Address space allowed to the limited `ember sim`, in KiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// Start `ember trace gen zipf` writing into the FIFO `fifo` (it blocks until read).
fn generate(fifo: &Path) -> Child {
    Command::new(EMBER)
        .args(["trace", "gen", "zipf", "--alpha", "0.9", "--blocks", "200000", "--requests"])
        .arg(REQUESTS.to_string())
        .args(["--seed", "7", "-o"])
        .arg(fifo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ember trace gen")
}

/// Run `ember sim` on the FIFO, under `ulimit -v limit_kib` if given; returns (success,
/// JSON report or stderr).
fn sim(fifo: &Path, policies: &str, limit_kib: Option<u64>) -> (bool, String) {
    let mut gen = generate(fifo);
    let cmd = format!(
        "{}exec \"$0\" sim \"$1\" --threads 1 --policy {policies} --size 2000 -q --json /dev/stdout",
        limit_kib.map_or(String::new(), |l| format!("ulimit -v {l} && "))
    );
    let out =
        Command::new("bash").args(["-c", &cmd, EMBER]).arg(fifo).output().expect("run ember sim");
    // If sim died early the generator gets EPIPE and exits; either way reap it.
    let _ = gen.kill();
    let _ = gen.wait();
    let ok = out.status.success();
    let text = if ok { out.stdout } else { out.stderr };
    (ok, String::from_utf8_lossy(&text).into_owned())
}

fn lru_misses(report: &str) -> u64 {
    let json = &report[report.find('{').expect("JSON in the output")..];
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON report");
    assert_eq!(v["requests"].as_u64(), Some(REQUESTS), "{report}");
    let runs = v["runs"].as_array().expect("runs");
    let lru = runs.iter().find(|r| r["policy"] == "lru").expect("an lru run");
    lru["misses"].as_u64().expect("misses")
}

#[test]
fn twenty_million_requests_stream_under_a_64_mib_address_space_with_exact_misses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("zipf.ember");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());

    let (ok, limited) = sim(&fifo, "lru,s3fifo", Some(LIMIT_KIB));
    assert!(ok, "streamed ember sim failed under ulimit -v {LIMIT_KIB}: {limited}");
    let streamed = lru_misses(&limited);

    // Negative control: the whole-trace path (OPT needs the future) cannot run in this limit.
    let (ok, err) = sim(&fifo, "lru,opt", Some(LIMIT_KIB));
    assert!(!ok, "a whole-trace run fit in {LIMIT_KIB} KiB, so the limit proves nothing");
    assert!(!err.is_empty());

    // Reference: the same trace, unlimited, through the whole-trace path.
    let (ok, whole) = sim(&fifo, "lru,opt", None);
    assert!(ok, "unlimited run failed: {whole}");
    assert_eq!(streamed, lru_misses(&whole));
    assert!(streamed > REQUESTS / 10 && streamed < REQUESTS, "{streamed}");
}
