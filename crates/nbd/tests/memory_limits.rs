//! Clients cannot exhaust the server's memory. 32 raw clients each send four
//! 32 MiB READs and never read a byte of the replies (4 GiB asked for). The server holds no
//! more than its shared budget of reply buffers, a well-behaved client is still served, and
//! the memory comes back when the hostile clients go. Alone in its test binary, so the
//! process's RSS is the server's (plus the test's small clients).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_nbd::server::ServerConfig;
use ember_nbd::{proto, ExportMap, MemExport};
use ember_testkit::nbd::*;

const MIB: u64 = 1 << 20;
/// The shared budget this test configures.
const BUDGET: u64 = 128 * MIB;
/// The bound stated in docs/reference/limits.md for this test: RSS grows by at most the budget plus
/// 96 MiB (thread stacks, socket-side buffers of 33 connections, allocator slack) while the
/// hostile clients hold everything they can. Without the budget it would grow by 1 GiB
/// (one 32 MiB reply per connection) or more.
const GROWTH_BOUND: u64 = BUDGET + 96 * MIB;

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    let kib: u64 = line.split_whitespace().nth(1).expect("value").parse().expect("number");
    kib * 1024
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn readers_that_never_read_cannot_exhaust_memory() {
    let config = ServerConfig {
        shared_budget: BUDGET,
        max_connections: 40,
        workers: 4,
        ..ServerConfig::default()
    };
    let server = serve_with(
        ExportMap::new().with("big", "", Arc::new(MemExport::new(64 * MIB))).with(
            "good",
            "",
            Arc::new(MemExport::new(MIB)),
        ),
        config,
    );
    let handle = server.running.as_ref().expect("running").shutdown_handle();
    let good = server.client("good");
    assert_works(&good, 1);
    let baseline = rss();

    let mut hostile = Vec::new();
    for i in 0..32u64 {
        let (mut raw, size, _) = Raw::go(server.tcp, "big", i % 2 == 0);
        assert_eq!(size, 64 * MIB);
        for j in 0..4u64 {
            raw.request(0, proto::CMD_READ, j, (j % 2) * 32 * MIB, 32 << 20, &[]);
        }
        hostile.push(raw);
    }
    // The budget fills: four 32 MiB replies are built and stuck; every other READ waits.
    wait_until("the shared budget to fill", Duration::from_secs(120), || {
        handle.budget_used() >= BUDGET
    });
    std::thread::sleep(Duration::from_millis(500));
    let held = handle.budget_used();
    let peak = rss();
    println!(
        "baseline RSS {} MiB, with 32 hostile readers {} MiB (budget held {} MiB)",
        baseline / MIB,
        peak / MIB,
        held / MIB
    );
    assert!(held <= BUDGET, "the budget is never exceeded by requests over 1 MiB: {held}");
    assert!(
        peak < baseline + GROWTH_BOUND,
        "RSS grew from {} MiB to {} MiB, more than the stated {} MiB",
        baseline / MIB,
        peak / MIB,
        GROWTH_BOUND / MIB
    );

    // A well-behaved client is still served while the budget is spent: its 64 KiB requests
    // go one at a time under the per-connection guarantee.
    let mut data = pattern(7, 4096);
    good.write(8192, &data, false).expect("write while the budget is spent");
    data.iter_mut().for_each(|b| *b = !*b);
    good.write(8192, &data, false).expect("second write");
    let mut back = vec![0u8; 4096];
    good.read(8192, &mut back).expect("read while the budget is spent");
    assert_eq!(back, data);
    // A new connection is accepted and served too.
    let late = server.client("good");
    assert_works(&late, 2);
    late.disconnect().expect("disconnect");

    // The hostile clients go: every buffer is freed and the memory comes back.
    drop(hostile);
    wait_until("the hostile connections to close", Duration::from_secs(120), || {
        handle.connections() == 1
    });
    assert_eq!(handle.budget_used(), 0, "every charge is released");
    let after = rss();
    println!("RSS after the hostile clients left: {} MiB", after / MIB);
    assert!(
        after < baseline + 48 * MIB,
        "memory did not come back: baseline {} MiB, after {} MiB",
        baseline / MIB,
        after / MIB
    );
    assert_works(&good, 3);
    good.disconnect().expect("disconnect");
    server.stop();
}
