//! `ember serve` losing its cache device to real faults (docs/reference/degraded.md): the
//! cache file on a file system that starts failing (nbdkit's `error` filter with
//! `error-file`, exported through nbdfuse) or hangs (nbdkit's `pause` filter, with
//! `--io-timeout`), at a random request of a writing and verifying client, under write policies
//! drawn at random. `scripts/degraded_trials.py` holds the harness and the checks: no wrong
//! byte, no client error after the switch (none at all under write-through and write-around),
//! the lost list equal to the blocks dirty at the failure, and the restart rules. 20 trials
//! here; `EMBER_DEGRADED_TRIALS=N` for more (`make crash-long`).
//!
//! Back to caching (`ember ctl replace-cache`): under write-through and write-back-flush, the
//! degraded server gets a new cache file and must cache again (a block read twice hits), with
//! every byte right and the lost list unchanged, and a restart configured with the failed
//! device runs on the new one; and SIGKILL trials at random points of the replacement, under
//! policies drawn at random, check every FLUSHed byte and the lost list after the restart (3
//! trials here; half of `EMBER_DEGRADED_TRIALS` under `make crash-long`).

mod serve_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serve_support::*;

fn trials_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/degraded_trials.py")
}

/// nbdkit, nbdfuse and FUSE itself are there (else the test is skipped, or fails under
/// `EMBER_REQUIRE_TOOLS=1`).
fn have_fuse() -> bool {
    let ok = ["nbdkit", "nbdfuse", "fusermount3"]
        .iter()
        .all(|t| Command::new(t).arg("--version").output().is_ok_and(|o| o.status.success()))
        && std::path::Path::new("/dev/fuse").exists();
    if !ok && std::env::var_os("EMBER_REQUIRE_TOOLS").is_some() {
        panic!("nbdkit, nbdfuse or /dev/fuse is missing (EMBER_REQUIRE_TOOLS=1)");
    }
    ok
}

/// Run the trials script with `args` (`n` trials) and check its summary.
fn trials(n: u64, args: &[&str]) {
    let out = run_status(
        Command::new(trials_script()).arg("--ember").arg(ember()).args(args),
        Duration::from_secs(120 + 30 * n),
    );
    let text = format!("{}\n{}", out.stdout, out.stderr);
    eprintln!("{text}");
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("degraded-json: "))
        .unwrap_or_else(|| panic!("no degraded-json line:\n{text}"));
    let j: serde_json::Value =
        serde_json::from_str(summary).unwrap_or_else(|e| panic!("degraded-json: {e}\n{text}"));
    assert_eq!(j["trials"].as_u64(), Some(n), "{text}");
    assert_eq!(j["wrong_bytes"].as_u64(), Some(0), "{text}");
    assert_eq!(j["errors_after_switch"].as_u64(), Some(0), "{text}");
    assert_eq!(j["failed"].as_u64(), Some(0), "{text}");
    assert!(out.status.success(), "{text}");
}

#[test]
fn the_cache_device_fails_under_every_write_policy_and_no_byte_is_wrong() {
    if !have_fuse() {
        eprintln!("skipped: nbdkit, nbdfuse or /dev/fuse missing");
        return;
    }
    let n = std::env::var("EMBER_DEGRADED_TRIALS").unwrap_or_else(|_| "20".into());
    trials(n.parse().unwrap_or(20), &["--trials", &n, "--seed", "41"]);
}

#[test]
fn a_new_cache_device_replaces_the_failed_one_while_serving() {
    if !have_fuse() {
        eprintln!("skipped: nbdkit, nbdfuse or /dev/fuse missing");
        return;
    }
    for policy in ["write-through", "write-back-flush"] {
        let args = ["--trials", "1", "--seed", "43", "--fault", "eio", "--replace", "serve"];
        trials(1, &[&args[..], &["--policy", policy]].concat());
    }
}

#[test]
fn sigkill_during_replace_cache_loses_nothing_flushed() {
    if !have_fuse() {
        eprintln!("skipped: nbdkit, nbdfuse or /dev/fuse missing");
        return;
    }
    let n = std::env::var("EMBER_DEGRADED_TRIALS")
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(3, |n| (n / 2).max(1));
    let count = n.to_string();
    trials(n, &["--trials", &count, "--seed", "44", "--fault", "eio", "--replace", "kill"]);
}
