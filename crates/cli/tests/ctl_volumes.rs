//! The volume commands as a user runs them (docs/reference/control.md), with real clients:
//! two volumes under write-back persist with dirty blocks; `ember ctl uncache a` while qemu-io
//! reads `a` over and over (every read verifies its pattern, none fails); `ember ctl remove b`
//! while nbdcopy writes to `b` (refused while it is connected, then `--force`: nbdcopy gets
//! ESHUTDOWN, and `b`'s backing holds every byte written, old or new, none lost); `ember ctl
//! attach c=PATH` (served at once from its backing); `ember ctl set --volume c` (not saved);
//! a clean restart naming `a` and `c` serves the recorded set, `a` still uncached, every byte
//! intact; a restart from a config file naming no volume serves the same set from the cache
//! device's records, `c` with the setting it was given, and says so. And shares changed on a
//! server started with none, and `attach --set` checked whole before anything is attached.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// Each volume of a status reply: (name, state).
fn volumes(st: &serde_json::Value) -> Vec<(String, String)> {
    st["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().into(), v["state"].as_str().unwrap().into()))
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

#[test]
fn uncache_remove_attach_and_restart_with_real_clients() {
    if !(have("qemu-io") && have("nbdcopy")) && skip_or_fail("qemu-io and nbdcopy are needed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for v in ["a", "b"] {
        sparse_file(&d.join(format!("{v}.img")), SIZE);
    }
    std::fs::write(d.join("c.img"), vec![0x64u8; SIZE as usize]).unwrap();
    let sock = d.join("ctl.sock");
    let cache = d.join("cache.img");
    // The dirty thresholds above what is written: the flusher idles, the blocks stay dirty.
    let common = |args: ServeArgs| {
        args.args(["--write-policy", "write-back-persist", "--max-dirty", "90%"]).args([
            "--min-dirty",
            "80%",
            "--control",
            &sock.display().to_string(),
        ])
    };
    let serve = common(
        ServeArgs::file_cache(&cache, "32M")
            .backing("a", d.join("a.img").display())
            .backing("b", d.join("b.img").display()),
    )
    .start();
    for (v, byte) in [("a", "0x61"), ("b", "0x62")] {
        let out = qemu_io(&serve.uri(v), &format!("write -P {byte} 0 4M; flush"));
        assert!(out.contains("wrote 4194304/4194304"), "{out}");
    }
    assert_eq!(status(&sock)["cache"]["dirty_blocks"], 2048, "4 MiB dirty on each volume");

    // Uncache a while qemu-io reads it: every read verifies its pattern.
    let mut reader = Command::new("qemu-io");
    reader.args(["-f", "raw", &serve.uri("a")]);
    for _ in 0..40 {
        reader.args(["-c", "read -P 0x61 0 4M"]);
    }
    let reader = reader.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let out = ctl(&sock, &["--json", "uncache", "a"]);
    assert!(out.status.success(), "{}", out.stderr);
    let read = reader.wait_with_output().unwrap();
    let printed =
        String::from_utf8_lossy(&read.stdout).to_string() + &String::from_utf8_lossy(&read.stderr);
    assert!(read.status.success(), "{printed}");
    assert!(!printed.contains("failed") && !printed.contains("error"), "{printed}");
    assert_eq!(printed.matches("read 4194304/4194304").count(), 40, "{printed}");
    let st = status(&sock);
    assert_eq!(volumes(&st), pairs(&[("a", "uncached"), ("b", "cached")]));
    assert!(std::fs::read(d.join("a.img")).unwrap().iter().all(|&x| x == 0x61));
    let out = qemu_io(&serve.uri("a"), "read -P 0x61 0 4M");
    assert!(out.contains("read 4194304/4194304"), "{out}");

    // Remove b while nbdcopy writes to it, slowly, from a pipe.
    let mut copy = Command::new("nbdcopy")
        .args(["--synchronous", "--request-size=65536", "-", &serve.uri("b")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = copy.stdin.take().unwrap();
    // The last chunk waits for the removal, so nbdcopy is still connected when it comes,
    // however slowly the machine runs the steps between.
    let (removed, last_chunk) = std::sync::mpsc::channel::<()>();
    let feeder = std::thread::spawn(move || {
        let chunk = vec![0x63u8; 64 << 10];
        let chunks = SIZE / (64 << 10);
        for i in 0..chunks {
            if i + 1 == chunks {
                let _ = last_chunk.recv_timeout(Duration::from_secs(120));
            }
            if pipe.write_all(&chunk).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    });
    // Until nbdcopy's first writes are acknowledged (b had 1024 block writes before).
    let writes_b = || {
        let st = status(&sock);
        st["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "b").unwrap()["writes"]
            .as_u64()
            .unwrap()
    };
    let t0 = Instant::now();
    while writes_b() < 1024 + 32 {
        assert!(t0.elapsed() < Duration::from_secs(20), "nbdcopy never wrote");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = ctl(&sock, &["remove", "b"]);
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("client connection") && out.stderr.contains("--force"),
        "{}",
        out.stderr
    );
    let out = ctl(&sock, &["--json", "remove", "--force", "b"]);
    assert!(out.status.success(), "{}", out.stderr);
    let reply: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(reply["clients"], 1, "{reply}");
    let _ = removed.send(());
    let copied = copy.wait_with_output().unwrap();
    feeder.join().unwrap();
    let said = String::from_utf8_lossy(&copied.stderr).to_lowercase();
    assert!(!copied.status.success() && said.contains("shutdown"), "nbdcopy: {said}");
    let b = std::fs::read(d.join("b.img")).unwrap();
    assert!(b.iter().all(|&x| x == 0x62 || x == 0x63), "b.img holds only what was written");
    assert!(b[..128 << 10].iter().all(|&x| x == 0x63), "nbdcopy's first writes are on backing");
    assert_eq!(volumes(&status(&sock)), pairs(&[("a", "uncached")]));

    // Attach c: served at once, from its backing.
    let c = d.join("c.img").display().to_string();
    let out = ctl(&sock, &["attach", &format!("c={c}"), "--set", "wrong"]);
    assert!(!out.status.success() && out.stderr.contains("KEY=VALUE"), "{}", out.stderr);
    let out = ctl(&sock, &["attach", &format!("c={c}"), "--set", "no-such-key=1"]);
    assert!(
        !out.status.success() && out.stderr.contains("not a volume's own setting"),
        "{}",
        out.stderr
    );
    let out = ctl(&sock, &["attach", &format!("c={c}"), "--set", "write-policy=write-around"]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.contains("attached c"), "{}", out.stdout);
    assert!(out.stdout.contains("write-policy = write-around"), "{}", out.stdout);
    let out = ctl(&sock, &["get", "--volume", "c", "write-policy"]);
    assert!(out.stdout.contains("write-around"), "{}", out.stdout);
    let out = qemu_io(&serve.uri("c"), "read -P 0x64 0 4M; write -P 0x66 0 1M; flush");
    assert!(out.contains("wrote 1048576/1048576"), "{out}");
    let out = qemu_io(&serve.uri("a"), "write -P 0x65 0 1M; flush");
    assert!(out.contains("wrote 1048576/1048576"), "{out}");
    let out = ctl(&sock, &["set", "--volume", "c", "write-policy", "write-through"]);
    assert!(out.status.success(), "{}", out.stderr);
    serve.stop();

    // The recorded set, named again: a (uncached) and c; every byte intact.
    let serve = common(
        ServeArgs::file_cache(&cache, "32M")
            .backing("a", d.join("a.img").display())
            .backing("c", &c),
    )
    .start();
    assert!(!serve.output().contains("recorded now"), "{}", serve.output());
    assert_eq!(volumes(&status(&sock)), pairs(&[("a", "uncached"), ("c", "cached")]));
    qemu_io(&serve.uri("a"), "read -P 0x65 0 1M; read -P 0x61 1M 3M");
    qemu_io(&serve.uri("c"), "read -P 0x66 0 1M; read -P 0x64 1M 3M");
    serve.stop();

    // No volume named (a config file without a [[volume]] table): the cache device's records
    // are the set, with c's own setting.
    let cfg = d.join("ember.toml");
    let text = format!(
        "control = \"{}\"\n[cache]\ndevice = \"{}\"\n[live]\nwrite-policy = \"write-back-persist\"\n\
         [live.writeback]\nmax-dirty = \"90%\"\nmin-dirty = \"80%\"\n",
        sock.display(),
        cache.display()
    );
    std::fs::write(&cfg, text).unwrap();
    let serve = ServeArgs::default().args(["--config", &cfg.display().to_string()]).start();
    let said = serve.output();
    for v in ["a", "c"] {
        let line = format!("volume {v}: recorded on the cache device, not named: served");
        assert!(said.contains(&line), "{said}");
    }
    let st = status(&sock);
    assert_eq!(volumes(&st), pairs(&[("a", "uncached"), ("c", "cached")]));
    let c_status = st["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "c").unwrap();
    assert_eq!(c_status["own_write_policy"], "write-through", "{st}");
    assert_eq!(c_status["backing"], c.as_str(), "{st}");
    qemu_io(&serve.uri("a"), "read -P 0x65 0 1M; read -P 0x61 1M 3M");
    qemu_io(&serve.uri("c"), "read -P 0x66 0 1M; read -P 0x64 1M 3M");
    serve.stop();
}

/// The volume `name` of a status reply.
fn volume<'a>(st: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    st["volumes"].as_array().unwrap().iter().find(|v| v["name"] == name).unwrap()
}

/// A server started with no share (write-through, LRU) takes one while serving: the cached
/// blocks are counted at once and none is evicted, the volume's next allocations evict its
/// own blocks; a share that the minimums would overflow is refused with the reason; clearing
/// it leaves the blocks cached. An `attach --set` with one refused value attaches nothing
/// (the volume set stays as it was); a valid one attaches with its share in force.
#[test]
fn shares_change_while_serving_and_attach_checks_its_settings_first() {
    if !have("qemu-io") && skip_or_fail("qemu-io is needed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for v in ["a", "b", "c"] {
        sparse_file(&d.join(format!("{v}.img")), SIZE);
    }
    let sock = d.join("ctl.sock");
    let serve = ServeArgs::file_cache(d.join("cache.img"), "16M")
        .backing("a", d.join("a.img").display())
        .backing("b", d.join("b.img").display())
        .args(["--write-policy", "write-through", "--control", &sock.display().to_string()])
        .start();
    for v in ["a", "b"] {
        let out = qemu_io(&serve.uri(v), "read 0 2M");
        assert!(out.contains("read 2097152/2097152"), "{out}");
    }
    let st = status(&sock);
    assert_eq!(volume(&st, "b")["resident_blocks"], 512, "{st}");
    assert!(volume(&st, "b")["share_occupancy"].is_null(), "no share yet: {st}");

    let out = ctl(&sock, &["set", "--volume", "b", "max-share", "1M"]);
    assert!(out.status.success(), "{}", out.stderr);
    let st = status(&sock);
    let b = volume(&st, "b");
    assert_eq!(
        (b["max_share_blocks"].as_u64(), b["share_occupancy"].as_u64()),
        (Some(256), Some(512))
    );
    assert_eq!(b["resident_blocks"], 512, "nothing evicted: {st}");
    assert_eq!(volume(&st, "a")["share_occupancy"], 512, "{st}");
    let out = ctl(&sock, &["set", "--volume", "a", "min-share", "100%"]);
    assert!(!out.status.success() && out.stderr.contains("min shares add up to"), "{}", out.stderr);
    // Above its max, b's new blocks take its own room, not a's.
    let out = qemu_io(&serve.uri("b"), "read 2M 1M");
    assert!(out.contains("read 1048576/1048576"), "{out}");
    let st = status(&sock);
    assert_eq!(volume(&st, "b")["resident_blocks"], 512, "{st}");
    assert_eq!(volume(&st, "a")["resident_blocks"], 512, "{st}");
    let out = ctl(&sock, &["set", "--volume", "b", "max-share", "default"]);
    assert!(out.status.success(), "{}", out.stderr);
    let st = status(&sock);
    assert!(volume(&st, "b")["share_occupancy"].is_null(), "{st}");
    assert_eq!(volume(&st, "b")["resident_blocks"], 512, "{st}");

    // One refused value: nothing attached, the volume set unchanged.
    let c = format!("c={}", d.join("c.img").display());
    let before = volumes(&status(&sock));
    for bad in ["min-share=100%", "write-policy=write-back-persist", "max-share=lots"] {
        let out = ctl(&sock, &["attach", &c, "--set", "write-policy=write-around", "--set", bad]);
        assert!(!out.status.success(), "{bad}: {}", out.stdout);
        assert!(out.stderr.contains("not attached"), "{bad}: {}", out.stderr);
        assert_eq!(volumes(&status(&sock)), before, "{bad}");
    }
    let out =
        ctl(&sock, &["attach", &c, "--set", "max-share=1M", "--set", "write-policy=write-around"]);
    assert!(out.status.success(), "{}", out.stderr);
    let st = status(&sock);
    assert_eq!(volumes(&st), pairs(&[("a", "cached"), ("b", "cached"), ("c", "cached")]));
    assert_eq!(volume(&st, "c")["max_share_blocks"], 256, "{st}");
    assert_eq!(volume(&st, "c")["own_write_policy"], "write-around", "{st}");
    serve.stop();
}
