//! The reader's busy-poll (server/spin.rs): after a reply, with nothing in flight,
//! the reader polls its socket for a bounded, adaptive time before it blocks. A request that
//! arrives after the poll gave up is still read and answered (the reader then blocks
//! normally), and an idle connection costs at most one poll of CPU, not a busy core.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_nbd::server::ServerConfig;
use ember_nbd::{Export, ExportMap, MemExport};
use ember_testkit::nbd::*;
use std::sync::Arc;
use std::time::Duration;

const SIZE: u64 = 1 << 20;
const BS: u32 = 4096;

/// CPU time (user + system) this whole process has used so far.
fn process_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF and a valid pointer.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) }, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn server(spin: Duration) -> (TestServer, Vec<u8>) {
    let export = Arc::new(MemExport::new(SIZE));
    let content = pattern(11, SIZE as usize);
    export.write(0, &content, false).unwrap();
    let config = ServerConfig { spin, ..ServerConfig::default() };
    (serve_with(ExportMap::new().with("disk", "", export), config), content)
}

/// One READ of block `block`, checked against `content`.
fn read_block(raw: &mut Raw, cookie: u64, block: u64, content: &[u8]) {
    let offset = block * u64::from(BS);
    raw.request(0, 0, cookie, offset, BS, &[]);
    let (error, got_cookie) = raw.simple_reply();
    assert_eq!((error, got_cookie), (0, cookie), "READ {cookie} answered without error");
    let data = raw.bytes(BS as usize);
    let at = offset as usize;
    assert!(data == content[at..at + BS as usize], "READ {cookie} carried block {block}'s bytes");
}

// One test: the CPU check counts the whole process, so nothing may run beside it.
#[test]
fn late_requests_are_served_and_an_idle_connection_does_not_keep_polling() {
    // A 200 µs budget; requests after pauses far longer than it (and after none).
    let (srv, content) = server(Duration::from_micros(200));
    let (mut raw, size, _) = Raw::go(srv.tcp, "disk", false);
    assert_eq!(size, SIZE);
    let pauses_ms = [0u64, 0, 1, 30, 0, 120, 2, 0, 60, 0];
    for (i, pause) in pauses_ms.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(*pause));
        read_block(&mut raw, i as u64, (i as u64 * 37) % (SIZE / u64::from(BS)), &content);
    }
    // A WRITE after a pause longer than the budget, read back at once.
    std::thread::sleep(Duration::from_millis(40));
    let data = pattern(99, BS as usize);
    assert_eq!(
        raw.ask(0, 1, 500, 8 * u64::from(BS), BS, &data),
        (0, 500),
        "the late WRITE is answered"
    );
    let mut now = content.clone();
    now[8 * BS as usize..9 * BS as usize].copy_from_slice(&data);
    read_block(&mut raw, 501, 8, &now);
    drop(raw);
    srv.stop();

    // A budget of 50 ms makes a poll that never ends (or restarts in a loop) show up as
    // CPU time: an idle second after one READ may cost one poll, not the second.
    let (srv, content) = server(Duration::from_millis(50));
    let (mut raw, _, _) = Raw::go(srv.tcp, "disk", false);
    read_block(&mut raw, 1, 3, &content);
    let before = process_cpu();
    std::thread::sleep(Duration::from_secs(1));
    let idle_cpu = process_cpu() - before;
    assert!(
        idle_cpu < Duration::from_millis(300),
        "an idle connection used {idle_cpu:?} of CPU in 1 s (one poll is at most 50 ms)"
    );
    // And it still answers.
    read_block(&mut raw, 2, 4, &content);
    drop(raw);
    srv.stop();
}
