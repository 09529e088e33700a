//! A burst of large writes must not leave its buffers in the server's RSS after the client
//! leaves (RAM per cached block is the engine's state, not what a fill left behind).
//! fio writes 256 MiB through `ember serve` three times, in 8 MiB, 2 MiB and 512 KiB requests,
//! 8 in flight (up to 64 MiB of payload buffers at once), each on its own connection; once the
//! last has closed, the server's anonymous RSS may exceed what it was at ready by the engine's
//! state for the 65,536 blocks written and slack (5 MiB in all; 2.4 MiB measured), not by the
//! payload buffers. Before `memory_return.rs` this failed in 2 of 3 runs ("anonymous RSS grew
//! by 17.3 MiB", "11.4 MiB").
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::process::Command;
use std::time::{Duration, Instant};

use serve_support::*;

fn rss_anon(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn a_closed_connection_gives_its_write_buffers_back() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("disk.img"));
    sparse_file(&backing, 256 << 20);
    let serve = ServeArgs::file_cache(&cache, "320M").backing("disk", backing.display()).start();
    let ready = rss_anon(serve.pid());
    // Three bursts with different request sizes (glibc raises its mmap threshold after a
    // large buffer is freed, so later buffers come from the arenas), each on its own connection.
    for bs in ["8M", "2M", "512k"] {
        let out = run(
            Command::new("fio")
                .current_dir(dir.path())
                .args([
                    "--name=burst",
                    "--ioengine=nbd",
                    "--rw=write",
                    "--size=256M",
                    "--iodepth=8",
                ])
                .arg(format!("--bs={bs}"))
                .arg("--output-format=terse")
                .arg(format!("--uri={}", serve.uri("disk"))),
            Duration::from_secs(120),
        );
        assert!(!out.contains("error"), "{out}");
    }
    // The last connection's close is counted after the server has returned its buffers.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let samples = scrape(&serve.metrics);
        if metric(&samples, "ember_nbd_connections_open") == 0.0
            && metric(&samples, "ember_nbd_connections_opened_total") >= 3.0
        {
            break;
        }
        assert!(Instant::now() < deadline, "fio's connection did not close");
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = rss_anon(serve.pid());
    let growth = after.saturating_sub(ready);
    let samples = scrape(&serve.metrics);
    let written = metric(&samples, "ember_nbd_bytes_total");
    assert!(written >= (3 * (256u64 << 20)) as f64, "fio wrote {written} bytes");
    assert!(
        growth < 5 << 20,
        "anonymous RSS grew by {:.1} MiB across three closed 256 MiB write bursts (ready {:.1} MiB, \
         after {:.1} MiB): the payload buffers stayed in the allocator",
        growth as f64 / 1048576.0,
        ready as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    serve.stop();
}
