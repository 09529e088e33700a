//! The exits on error of the control commands that write dirty blocks back, through the real
//! command: `ember serve` under write-back persist over an nbdkit backing whose writes fail
//! while a file exists (the error filter's `error-pwrite-file`). With blocks dirty and
//! backing failing, `ember ctl flush` and `ember ctl set write-policy write-through` (a switch
//! out of write-back, which drains) each report the error in bounded time and leave every
//! dirty block dirty; the server lives on. Once backing takes writes again, the same
//! switch finishes its drain, nothing is dirty, and backing holds every byte.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// What the commands must take at most with backing failing (a flusher retry is well
/// under a second; the bound leaves room for a loaded machine).
const BOUND: Duration = Duration::from_secs(20);

/// `ember ctl --control SOCK ARGS`, with how long it took.
fn ctl(sock: &Path, args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let out = run_status(
        Command::new(ember()).arg("ctl").arg("--control").arg(sock).args(args),
        Duration::from_secs(120),
    );
    (out, t.elapsed())
}

fn dirty(sock: &Path) -> u64 {
    let (out, _) = ctl(sock, &["--json", "status"]);
    assert!(out.status.success(), "{}", out.stderr);
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    status["cache"]["dirty_blocks"].as_u64().unwrap()
}

fn have_tools() -> bool {
    let have = |t: &str| Command::new(t).arg("--version").output().is_ok();
    if have("nbdkit") && have("qemu-io") {
        return true;
    }
    !skip_or_fail("nbdkit and qemu-io are needed")
}

#[test]
fn a_failing_backing_fails_ctl_flush_and_a_switch_promptly_and_keeps_the_blocks_dirty() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fail = d.join("fail");
    let kit = Nbdkit::start(
        d,
        &[
            "--filter=error",
            "memory",
            "16M",
            "error-pwrite=EIO",
            "error-pwrite-rate=100%",
            &format!("error-pwrite-file={}", fail.display()),
        ],
    );
    let sock = d.join("ctl.sock");
    // The dirty thresholds above what is written: the flusher idles until asked.
    let serve = ServeArgs::file_cache(d.join("cache.img"), "32M")
        .backing("disk", kit.uri())
        .args(["--write-policy", "write-back-persist", "--max-dirty", "90%", "--min-dirty", "80%"])
        .args(["--control", &sock.display().to_string()])
        .start();
    let qemu = |args: &[&str]| {
        let mut c = Command::new("qemu-io");
        c.args(["-f", "raw", "-t", "writeback"]).args(args);
        run(&mut c, Duration::from_secs(60))
    };
    let wrote = qemu(&[&serve.uri("disk"), "-c", "write -P 0x5a 0 2M", "-c", "flush"]);
    assert!(wrote.contains("wrote 2097152/2097152"), "{wrote}");
    let dirty0 = dirty(&sock);
    assert_eq!(dirty0, 512, "2 MiB written under write-back persist, none flushed yet");

    std::fs::write(&fail, b"").unwrap();
    let (out, took) = ctl(&sock, &["flush"]);
    assert!(!out.status.success(), "ctl flush succeeded over a failing backing:\n{}", out.stdout);
    assert!(out.stderr.contains("failed"), "the error is reported: {}", out.stderr);
    assert!(took < BOUND, "ctl flush took {took:?} to report the error");
    assert_eq!(dirty(&sock), dirty0, "a failed flush keeps every dirty block dirty");

    let (out, took) = ctl(&sock, &["set", "write-policy", "write-through"]);
    assert!(!out.status.success(), "the switch succeeded over a failing backing:\n{}", out.stdout);
    assert!(out.stderr.contains("failed"), "the error is reported: {}", out.stderr);
    assert!(took < BOUND, "the switch took {took:?} to report the error");
    assert_eq!(dirty(&sock), dirty0, "a failed drain keeps every dirty block dirty");
    // Still serving: reads are answered from the cache.
    let read = qemu(&["-r", &serve.uri("disk"), "-c", "read -P 0x5a 0 2M"]);
    assert!(read.contains("read 2097152/2097152"), "{read}");

    // Backing takes writes again: the same switch waits for its drain and completes.
    std::fs::remove_file(&fail).unwrap();
    let (out, _) = ctl(&sock, &["set", "write-policy", "write-through"]);
    assert!(out.status.success(), "the switch after backing recovered: {}", out.stderr);
    assert_eq!(dirty(&sock), 0);
    let (out, _) = ctl(&sock, &["get", "write-policy"]);
    assert_eq!(out.stdout, "write-policy = write-through\n");
    let backing = qemu(&["-r", &kit.uri(), "-c", "read -P 0x5a 0 2M"]);
    assert!(backing.contains("read 2097152/2097152"), "backing holds every byte: {backing}");
    serve.stop();
}
