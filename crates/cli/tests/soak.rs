//! The one-minute soak (`make soak DURATION=…` runs it at length): the real
//! `ember serve` under write-back-persist and write-through, each with a volume on nbdkit's file
//! plugin behind its `error` (1 % EIO) and `delay` filters and a plain file volume; 8 verifying
//! python3-libnbd clients with reads, writes, FUA, FLUSH, TRIM and WRITE_ZEROES; abrupt
//! disconnects; a SIGKILL + restart of each server every 15-25 s; one failure of the
//! write-through server's cache device (its file system fails with EIO: degraded mode, then
//! back to caching on the healed device at a restart). `scripts/soak.py` holds the
//! harness and the checker (docs/design/testing.md). The negative controls: the same checker
//! against
//! unsafe write-back must catch lost flushed writes, and a growth bound below the first sample
//! must fail the soak.

mod serve_support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serve_support::*;

/// The two soaks each load both cores; run them one after the other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn soak_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/soak.py")
}

/// Run the soak with `args`; returns (exit success, the `soak-json` summary, all output).
fn soak(args: &[&str]) -> (bool, serde_json::Value, String) {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ember = ember();
    let out = run_status(
        Command::new(soak_script()).arg("--ember").arg(&ember).args(args),
        Duration::from_secs(600),
    );
    let text = format!("{}\n{}", out.stdout, out.stderr);
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("soak-json: "))
        .unwrap_or_else(|| panic!("no soak-json line in the soak's output:\n{text}"));
    let json: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("soak-json: {e}\n{text}"));
    (out.status.success(), json, text)
}

fn count(j: &serde_json::Value, key: &str) -> u64 {
    j["counters"][key].as_u64().unwrap_or_else(|| panic!("counter {key} missing"))
}

#[test]
fn one_minute_soak_with_faults_disconnects_and_sigkills_loses_no_byte() {
    let (ok, j, text) = soak(&["--duration", "60", "--restart-every", "15-25", "--seed", "7"]);
    assert!(ok, "the soak failed:\n{text}");
    assert_eq!(j["lost_or_wrong_bytes"].as_u64(), Some(0), "{text}");
    // The soak did what it claims: faults reached the clients, both servers were killed and
    // recovered, every kind of abrupt disconnect happened, reads were verified.
    assert!(j["restarts"].as_u64().unwrap_or(0) >= 4, "fewer than 2 SIGKILLs per server:\n{text}");
    assert!(j["faults_injected"].as_u64().unwrap_or(0) > 0, "{text}");
    assert!(count(&j, "eio") > 0, "no EIO reached a client:\n{text}");
    assert!(count(&j, "verified_reads") > 1000, "{text}");
    assert!(
        count(&j, "crash_checks") >= 8,
        "each client checks its region after a SIGKILL:\n{text}"
    );
    for kind in ["handshake", "partial_write", "write_no_reply", "reads_no_reply", "libnbd_close"] {
        assert!(count(&j, &format!("abrupt_{kind}")) > 0, "no abrupt {kind}:\n{text}");
    }
    for k in ["writes", "fua_writes", "flushes", "trims", "zeroes"] {
        assert!(count(&j, k) > 0, "no {k}:\n{text}");
    }
    assert_eq!(count(&j, "unexpected_errors"), 0, "{text}");
    // The cache-device failure among the faults: the write-through server's cache file system
    // failed with EIO, the server switched to degraded mode (no client error, counted above)
    // and came back to caching on the healed device, reformatted at its restart.
    let failing_tools = ["nbdkit", "nbdfuse", "fusermount3"]
        .iter()
        .all(|t| Command::new(t).arg("--version").output().is_ok_and(|o| o.status.success()))
        && std::path::Path::new("/dev/fuse").exists();
    if failing_tools {
        let failures = j["cache_failures"].as_array().cloned().unwrap_or_default();
        assert_eq!(failures.len(), 1, "one cache-device failure:\n{text}");
        let switch = failures[0]["switch_s"].as_f64();
        assert!(switch.is_some_and(|s| s < 5.0), "the switch to degraded mode:\n{text}");
        assert_eq!(failures[0]["healthy_after"].as_bool(), Some(true), "{text}");
    } else {
        eprintln!("no cache-device failure: nbdkit, nbdfuse or /dev/fuse missing");
    }
}

/// Negative control: unsafe write-back ignores FLUSH, so a SIGKILL loses flushed writes. The
/// checker must see them and the soak must fail.
#[test]
fn the_soak_catches_unsafe_write_back_losing_flushed_writes() {
    let (ok, j, text) = soak(&[
        "--duration",
        "25",
        "--restart-every",
        "10-12",
        "--policies",
        "unsafe-write-back",
        "--clients",
        "4",
        "--seed",
        "8",
    ]);
    assert!(!ok, "the soak passed against unsafe write-back:\n{text}");
    assert!(j["restarts"].as_u64().unwrap_or(0) >= 1, "{text}");
    let lost = count(&j, "lost_bytes");
    assert!(lost > 0, "unsafe write-back lost nothing the checker saw:\n{text}");
    assert!(text.contains("-> LOST"), "{text}");
    assert!(text.contains("soak: FAIL"), "{text}");
    assert_failed_soak_left_only_logs(&text);
}

/// The growth check is wired to the exit code: with a bound of one fd *below* the first sample
/// (`--fd-slack -1`), any server fails it, and the soak must say so and exit 1.
#[test]
fn a_growth_bound_the_server_exceeds_fails_the_soak() {
    let (ok, j, text) = soak(&[
        "--duration",
        "15",
        "--restart-every",
        "0",
        "--clients",
        "2",
        "--warmup",
        "3",
        "--fd-slack",
        "-1",
        "--seed",
        "9",
    ]);
    assert!(!ok, "the soak passed with an fd bound below the first sample:\n{text}");
    assert_eq!(j["lost_or_wrong_bytes"].as_u64(), Some(0), "{text}");
    let problems = j["problems"].to_string();
    assert!(problems.contains("grew past the bound"), "{problems}\n{text}");
    assert_failed_soak_left_only_logs(&text);
}

/// A failed soak in a temporary work directory (no `--workdir`) keeps its logs for the
/// post-mortem and deletes its images, a few hundred MiB a run. Without this check every
/// run of the tests could leave two such directories (the two negative controls) in /tmp,
/// and they piled up by the gigabyte.
fn assert_failed_soak_left_only_logs(text: &str) {
    let work = text
        .lines()
        .find_map(|l| l.split_once(", workdir ").map(|(_, w)| w.trim().to_string()))
        .unwrap_or_else(|| panic!("no workdir in the soak's first line:\n{text}"));
    let names: Vec<String> = std::fs::read_dir(&work)
        .unwrap_or_else(|e| panic!("{work}: {e}"))
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{work}: {e}"));
    assert!(names.iter().any(|n| n.ends_with(".log")), "no logs kept in {work}: {names:?}");
    let big: Vec<_> = names.iter().filter(|n| !n.ends_with(".log")).collect();
    assert!(big.is_empty(), "a failed soak left {big:?} in {work}");
    assert!(text.contains(&format!("soak: logs kept in {work}")), "{text}");
    std::fs::remove_dir_all(&work).unwrap_or_else(|e| panic!("{work}: {e}"));
}

/// The soak client's own crash handling (`scripts/soaklib/selftest.py`, against nbdkit's file
/// plugin and python3-libnbd): a SIGKILL that lands while a client drops its libnbd handle
/// with I/O in flight (the fifth abrupt kind) sends its new connection to the server's next
/// life. The client must then check its region under the crash contract, not hold reads to
/// writes the kill was allowed to lose. Before the fix it reconnected without that check, and
/// the one-minute soak failed now and then on write-back-persist with false `-> LOST` reports
/// (older generations, or zeros, of sectors written after the last FLUSH); the self-test
/// printed `crash checks 0, lost bytes 8192` and `holds stamp(export 0, sector 64, gen 0),
/// allowed [1] -> LOST`.
#[test]
fn a_kill_while_a_client_drops_its_handle_leads_to_the_crash_check() {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/soaklib/selftest.py");
    let out = run_status(&mut Command::new(script), Duration::from_secs(120));
    let text = format!("{}\n{}", out.stdout, out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("selftest: crash checks 1, lost bytes 0, wrong bytes 0"), "{text}");
}
