//! `ember ctl flush VOLUME` as docs/reference/control.md describes it: the volume must
//! exist (another name is an error that lists the volumes), and the flush writes back every
//! volume's dirty blocks, not only the named one's: epochs are shared by every volume of the
//! cache and the flusher writes them back oldest first, so one volume's blocks are not
//! written back apart from the others'. The reply counts every block written back.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const SIZE: u64 = 4 << 20;

fn ctl(sock: &Path, args: &[&str]) -> Output {
    run_status(
        Command::new(ember()).arg("ctl").arg("--control").arg(sock).args(args),
        Duration::from_secs(120),
    )
}

fn status(sock: &Path) -> serde_json::Value {
    let out = ctl(sock, &["--json", "status"]);
    assert!(out.status.success(), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn ctl_flush_of_one_volume_checks_its_name_and_flushes_every_volume() {
    if Command::new("qemu-io").arg("--version").output().is_err()
        && skip_or_fail("qemu-io is needed")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for v in ["a", "b"] {
        sparse_file(&d.join(format!("{v}.img")), SIZE);
    }
    let sock = d.join("ctl.sock");
    // The dirty thresholds above what is written: the flusher idles until asked.
    let serve = ServeArgs::file_cache(d.join("cache.img"), "32M")
        .backing("a", d.join("a.img").display())
        .backing("b", d.join("b.img").display())
        .args(["--write-policy", "write-back-persist", "--max-dirty", "90%", "--min-dirty", "80%"])
        .args(["--control", &sock.display().to_string()])
        .start();
    for (v, byte) in [("a", "0x61"), ("b", "0x62")] {
        let mut c = Command::new("qemu-io");
        c.args(["-f", "raw", "-t", "writeback", &serve.uri(v), "-c"])
            .arg(format!("write -P {byte} 0 1M"));
        let out = run(&mut c, Duration::from_secs(60));
        assert!(out.contains("wrote 1048576/1048576"), "{out}");
    }
    assert_eq!(status(&sock)["cache"]["dirty_blocks"], 512, "1 MiB dirty on each volume");

    let out = ctl(&sock, &["flush", "nosuch"]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("no volume \"nosuch\" (volumes: a, b)"), "{}", out.stderr);
    assert_eq!(status(&sock)["cache"]["dirty_blocks"], 512, "a refused flush writes nothing");

    let out = ctl(&sock, &["--json", "flush", "a"]);
    assert!(out.status.success(), "{}", out.stderr);
    let reply: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!((reply["volume"].clone(), reply["blocks"].clone()), ("a".into(), 512.into()));
    assert_eq!(status(&sock)["cache"]["dirty_blocks"], 0, "every volume was flushed");
    for (v, byte) in [("a", 0x61u8), ("b", 0x62)] {
        let backing = std::fs::read(d.join(format!("{v}.img"))).unwrap();
        assert!(backing[..1 << 20].iter().all(|&x| x == byte), "{v}.img holds its writes");
    }
    serve.stop();
}
