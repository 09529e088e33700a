//! Every wait ends on a failing backing, through the real command: `ember serve
//! --write-policy write-back-flush`
//! over an nbdkit backing that fails every write (its error filter). qemu-io writes and
//! FLUSHes until the dirty epochs reach the cap (4); the next write used to wait forever for a
//! flusher that can never succeed, and SIGTERM then hung (the server waits for requests in
//! flight). Now that write fails with EIO in bounded time and `ember serve` exits on SIGTERM,
//! saying the dirty blocks could not be written.

mod serve_support;

use serve_support::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn write_back_flush_over_a_backing_that_fails_writes_errors_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kit = Nbdkit::start(
        dir.path(),
        &["--filter=error", "memory", "16M", "error-pwrite=EIO", "error-pwrite-rate=100%"],
    );
    let cache = dir.path().join("cache.img");
    let serve = ServeArgs::file_cache(&cache, "32M")
        .backing("disk", kit.uri())
        .args(["--write-policy", "write-back-flush"])
        .start();
    // Four epochs made dirty (each FLUSH fails: the flusher cannot write them), then a fifth
    // write past the cap of four dirty epochs.
    let mut cmds = Vec::new();
    for i in 0..4 {
        cmds.push(format!("write -P 0x{:x} {} 4k", 0x41 + i, i * 4096));
        cmds.push("flush".to_string());
    }
    cmds.push("write -P 0x55 65536 4k".to_string());
    let mut qemu = Command::new("qemu-io");
    qemu.args(["-f", "raw", "-t", "writeback", &serve.uri("disk")]);
    for c in &cmds {
        qemu.args(["-c", c]);
    }
    let t = Instant::now();
    let out = run_status(&mut qemu, Duration::from_secs(120));
    let took = t.elapsed();
    let text = format!("{}\n{}", out.stdout, out.stderr);
    eprintln!("qemu-io took {took:?}:\n{text}");
    assert_eq!(text.matches("wrote 4096/4096").count(), 4, "the first four writes: {text}");
    // (qemu-io prints nothing for a FLUSH, failed or not; had they succeeded, the fifth
    // write would have found room under the cap and succeeded too.)
    assert!(
        text.contains("write failed: Input/output error"),
        "the write past the epoch cap fails with EIO: {text}"
    );
    // SIGTERM: the server exits (the clean stop cannot write the dirty blocks and says so).
    let pid = serve.pid();
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(60);
    // SAFETY: kill(pid, 0) only checks that the process exists.
    while unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 && Instant::now() < deadline {
        let mut status = 0;
        // SAFETY: reaps our own child if it exited; WNOHANG never blocks.
        if unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) } > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = serve.output();
    assert!(Instant::now() < deadline, "ember serve did not exit within 60 s of SIGTERM:\n{after}");
    assert!(after.contains("signal"), "{after}");
    assert!(!after.contains("clean shutdown:"), "dirty blocks were not written:\n{after}");
    drop(serve);
}
