//! `ember serve --direct`: READ hits started as they are parsed and answered as their
//! io_uring reads complete (`crates/nbd/src/server/started_reads.rs`,
//! `Volume::start_hit`), checked from real clients: a block written over and over on one
//! connection while another keeps 32 READs of it (and of its neighbours) in flight never
//! reads back stale or torn; clients that vanish with READs in flight leave the server
//! serving every byte right to the others.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_nbd::{Client, ClientBuilder};
use serve_support::*;

const BS: usize = 4096;
/// Blocks the tests use.
const BLOCKS: u64 = 64;

/// Block `b` at version `v`: each 8-byte word is `v << 20 | b << 8 | word index % 256`.
fn pattern(b: u64, v: u64) -> Vec<u8> {
    (0..BS as u64 / 8).flat_map(|i| (v << 20 | b << 8 | (i & 0xff)).to_le_bytes()).collect()
}

/// The version a block holds, if every word of it is that version's (not torn).
fn version_of(b: u64, data: &[u8]) -> Option<u64> {
    let v = u64::from_le_bytes(data[..8].try_into().ok()?) >> 20;
    (data == pattern(b, v).as_slice()).then_some(v)
}

fn start_direct(dir: &std::path::Path) -> Serve {
    let (cache, backing) = (dir.join("cache.img"), dir.join("disk.img"));
    sparse_file(&backing, 16 << 20);
    ServeArgs::file_cache(&cache, "40M")
        .args(["--direct", "--backing", &format!("disk={}", backing.display())])
        .start()
}

/// A client of `serve`'s export that wrote version `v` of every block, through: all
/// resident, so READs of them are hits.
fn filled(serve: &Serve, v: u64) -> Client {
    let c = ClientBuilder::new().export("disk").connect_tcp(serve.nbd.as_str()).unwrap();
    for b in 0..BLOCKS {
        c.write(b * BS as u64, &pattern(b, v), false).unwrap();
    }
    c
}

#[test]
fn reads_at_depth_racing_writes_of_one_block_never_return_stale_or_torn_data() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_direct(dir.path());
    let writer = filled(&serve, 1);
    let hot = 5u64;
    // The newest version of `hot` acknowledged to the writer.
    let acked = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let writes = {
        let (acked, stop) = (acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut v = 1;
            while !stop.load(Ordering::SeqCst) {
                v += 1;
                writer.write(hot * BS as u64, &pattern(hot, v), false).unwrap();
                acked.store(v, Ordering::SeqCst);
            }
            v
        })
    };
    let reader = ClientBuilder::new().export("disk").connect_tcp(serve.nbd.as_str()).unwrap();
    let mut rng = Rng::new(14);
    let (mut reads, mut hot_reads, mut newer) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        // 32 READs in flight at once: every other one of the hot block.
        let mut batch = Vec::new();
        for i in 0..32 {
            let b = if i % 2 == 0 { hot } else { rng.below(BLOCKS) };
            let floor = if b == hot { acked.load(Ordering::SeqCst) } else { 1 };
            batch.push((b, floor, reader.start_read(b * BS as u64, BS as u32).unwrap()));
        }
        for (b, floor, r) in batch {
            let data = r.wait().unwrap();
            let v = version_of(b, &data)
                .unwrap_or_else(|| panic!("block {b}: torn or foreign data after {reads} reads"));
            assert!(v >= floor, "block {b}: read version {v}, but {floor} was acknowledged first");
            reads += 1;
            if b == hot {
                hot_reads += 1;
                newer += u64::from(v > floor);
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    let last = writes.join().unwrap();
    let mut data = vec![0u8; BS];
    reader.read(hot * BS as u64, &mut data).unwrap();
    assert_eq!(version_of(hot, &data), Some(last), "the last write is what reads back");
    assert!(last > 10, "the writer made progress: {last} versions");
    assert!(hot_reads > 100, "{hot_reads} reads of the hot block");
    let samples = scrape(&serve.metrics);
    assert_eq!(metric(&samples, "ember_nbd_errors_total"), 0.0);
    assert!(metric(&samples, "ember_cache_read_hits_total") >= reads as f64 / 2.0);
    // The READs started at depth read into the connection's registered slots (fixed reads:
    // their pages were pinned once, at registration).
    let ring = metric(&samples, "ember_cache_device_ring_reads_total");
    let fixed = metric(&samples, "ember_cache_device_ring_fixed_reads_total");
    assert!(fixed >= reads as f64 / 4.0, "{fixed} fixed of {ring} ring reads, {reads} READs");
    assert!(fixed <= ring && fixed * 2.0 >= ring, "{fixed} fixed of {ring} ring reads");
    eprintln!("{reads} reads, {hot_reads} of the hot block ({newer} saw a newer version than acknowledged at send), {last} versions written");
    serve.stop();
}

/// A bare NBD connection (fixed newstyle, NBD_OPT_EXPORT_NAME): the socket, once in
/// transmission.
fn bare_connection(addr: &str, export: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(&hello[..8], b"NBDMAGIC");
    let server_flags = u16::from_be_bytes([hello[16], hello[17]]);
    // NBD_FLAG_C_FIXED_NEWSTYLE, and NBD_FLAG_C_NO_ZEROES if offered.
    let client_flags: u32 = 1 | u32::from(server_flags & 2);
    s.write_all(&client_flags.to_be_bytes()).unwrap();
    let mut opt = Vec::new();
    opt.extend_from_slice(b"IHAVEOPT");
    opt.extend_from_slice(&1u32.to_be_bytes()); // NBD_OPT_EXPORT_NAME
    opt.extend_from_slice(&(export.len() as u32).to_be_bytes());
    opt.extend_from_slice(export.as_bytes());
    s.write_all(&opt).unwrap();
    let mut reply = vec![0u8; if server_flags & 2 != 0 { 10 } else { 134 }];
    s.read_exact(&mut reply).unwrap();
    s
}

fn read_request(cookie: u64, offset: u64, len: u32) -> [u8; 28] {
    let mut r = [0u8; 28];
    r[..4].copy_from_slice(&0x2560_9513u32.to_be_bytes());
    r[4..6].copy_from_slice(&0u16.to_be_bytes());
    r[6..8].copy_from_slice(&0u16.to_be_bytes()); // NBD_CMD_READ
    r[8..16].copy_from_slice(&cookie.to_be_bytes());
    r[16..24].copy_from_slice(&offset.to_be_bytes());
    r[24..28].copy_from_slice(&len.to_be_bytes());
    r
}

#[test]
fn clients_that_vanish_with_reads_in_flight_leave_the_server_serving() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_direct(dir.path());
    let c = filled(&serve, 7);
    // A steady reader on its own connection throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let batches = Arc::new(AtomicU64::new(0));
    let steady = {
        let (addr, stop, batches) = (serve.nbd.clone(), stop.clone(), batches.clone());
        std::thread::spawn(move || {
            let c = ClientBuilder::new().export("disk").connect_tcp(addr.as_str()).unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let inflight: Vec<_> = (0..16)
                    .map(|i| {
                        let b = (n + i) % BLOCKS;
                        (b, c.start_read(b * BS as u64, BS as u32).unwrap())
                    })
                    .collect();
                for (b, r) in inflight {
                    assert_eq!(version_of(b, &r.wait().unwrap()), Some(7), "block {b}");
                }
                n += 16;
                batches.fetch_add(1, Ordering::SeqCst);
            }
            n
        })
    };
    // The churn starts once the steady reader is served, so it runs throughout.
    let t0 = Instant::now();
    while batches.load(Ordering::SeqCst) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(30), "the steady reader was never served");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Clients that send 64 READs (hits) and vanish without reading a reply: closed at once,
    // or after the server has started on them.
    for round in 0..40u64 {
        let mut s = bare_connection(&serve.nbd, "disk");
        let mut burst = Vec::new();
        for i in 0..64 {
            burst.extend_from_slice(&read_request(i, ((round + i) % BLOCKS) * BS as u64, 4096));
        }
        s.write_all(&burst).unwrap();
        if round % 2 == 1 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = s.shutdown(std::net::Shutdown::Both);
        drop(s);
    }
    stop.store(true, Ordering::SeqCst);
    let steady_reads = steady.join().unwrap();
    assert!(steady_reads > 0);
    // Every block still reads back right, on a new connection, and the server is alive.
    let mut data = vec![0u8; BS];
    for b in 0..BLOCKS {
        c.read(b * BS as u64, &mut data).unwrap();
        assert_eq!(version_of(b, &data), Some(7), "block {b}");
    }
    let samples = scrape(&serve.metrics);
    assert!(metric(&samples, "ember_cache_read_hits_total") > 40.0 * 64.0 / 2.0);
    serve.stop();
}

/// A SIGTERM while a client keeps 32 READs in flight: the reader, asleep on its ring with
/// the socket's poll armed (`crates/engine/src/device/uring.rs`), is woken by the shutdown of
/// its socket, drains its READs and the server exits cleanly and promptly.
#[test]
fn a_shutdown_while_reads_are_in_flight_is_clean_and_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_direct(dir.path());
    let c = filled(&serve, 3);
    drop(c);
    let served = Arc::new(AtomicU64::new(0));
    let reader = {
        let (addr, served) = (serve.nbd.clone(), served.clone());
        std::thread::spawn(move || {
            let c = ClientBuilder::new().export("disk").connect_tcp(addr.as_str()).unwrap();
            let mut n = 0u64;
            loop {
                let Ok(inflight) = (0..32)
                    .map(|i| {
                        let b = (n + i) % BLOCKS;
                        c.start_read(b * BS as u64, BS as u32).map(|r| (b, r))
                    })
                    .collect::<Result<Vec<_>, _>>()
                else {
                    return;
                };
                for (b, r) in inflight {
                    // Once the shutdown began a READ may fail (NBD_ESHUTDOWN, or the
                    // connection closed); one that succeeds has the right data.
                    match r.wait() {
                        Ok(data) => {
                            assert_eq!(version_of(b, &data), Some(3), "block {b}");
                            served.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => return,
                    }
                }
                n += 32;
            }
        })
    };
    let t = Instant::now();
    while served.load(Ordering::SeqCst) < 2_000 {
        assert!(t.elapsed() < Duration::from_secs(30), "the client got no READs served");
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    let text = serve.stop();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(10), "shutdown took {took:?}:\n{text}");
    reader.join().unwrap();
    assert!(served.load(Ordering::SeqCst) >= 2_000);
}

/// A bare connection whose receive buffer is small, so the server's sends of its replies
/// are taken in part (the `--direct` reader's batches lend their data from the READs'
/// slots: what the socket does not take is copied out before a slot is reused).
fn small_window_connection(addr: &str) -> TcpStream {
    use std::os::fd::AsRawFd;
    let s = bare_connection(addr, "disk");
    // Small, but not so small that loopback TCP crawls (a 4 KiB window waits on timers).
    let size: libc::c_int = 64 << 10;
    // SAFETY: `s` is an open socket; the option value is a c_int of that size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// `count` READs of 1..=16 blocks (cookie i, at block (7 i) % 48), sent at once.
fn read_burst(count: u64) -> (Vec<u8>, Vec<(u64, u32)>) {
    let mut burst = Vec::new();
    let mut asked = Vec::new();
    for i in 0..count {
        let (b, n) = ((7 * i) % 48, 1 + (i % 16) as u32);
        burst.extend_from_slice(&read_request(i, b * BS as u64, n * BS as u32));
        asked.push((b, n));
    }
    (burst, asked)
}

/// Read one simple reply (`asked[cookie]`'s data); check every block of it is version `v`.
fn check_reply(s: &mut TcpStream, asked: &[(u64, u32)], v: u64, seen: &mut [bool]) {
    let mut head = [0u8; 16];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head[..4], &0x6744_6698u32.to_be_bytes(), "reply magic");
    assert_eq!(&head[4..8], &[0; 4], "error");
    let cookie = u64::from_be_bytes(head[8..16].try_into().unwrap());
    let (b, n) = asked[cookie as usize];
    assert!(!seen[cookie as usize], "cookie {cookie} answered twice");
    seen[cookie as usize] = true;
    let mut data = vec![0u8; n as usize * BS];
    s.read_exact(&mut data).unwrap();
    for (k, block) in data.chunks(BS).enumerate() {
        let at = b + k as u64;
        assert_eq!(version_of(at, block), Some(v), "cookie {cookie}: block {at} of {b}+{n}");
    }
}

/// A burst of READs reaches the device in groups of more than two, which the kernel plugs
/// (`SUBMIT_EVERY` in `crates/nbd/src/server/started_reads.rs`): a group rings a virtio
/// disk's doorbell once, a VM exit, where reads handed over one or two at a time ring it
/// each (bench/serve, docs/benchmarks.md). Measured with this test's 50 bursts of 32:
/// groups of 8 gave 10.7-12.3 reads a hand-off, groups of two 2.6-4.5 (seen failing).
#[test]
fn a_burst_of_reads_reaches_the_device_in_groups_the_kernel_plugs() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_direct(dir.path());
    let _c = filled(&serve, 4);
    let mut s = bare_connection(&serve.nbd, "disk");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let asked: Vec<(u64, u32)> = (0..32).map(|i| ((5 * i) % BLOCKS, 1)).collect();
    let mut burst = Vec::new();
    for (cookie, &(b, n)) in asked.iter().enumerate() {
        burst.extend_from_slice(&read_request(cookie as u64, b * BS as u64, n * BS as u32));
    }
    let before = scrape(&serve.metrics);
    for _ in 0..50 {
        // The 32 requests in one write: the reader finds them buffered together.
        s.write_all(&burst).unwrap();
        let mut seen = vec![false; asked.len()];
        for _ in 0..asked.len() {
            check_reply(&mut s, &asked, 4, &mut seen);
        }
        assert!(seen.iter().all(|&x| x));
    }
    let after = scrape(&serve.metrics);
    let delta = |name| metric(&after, name) - metric(&before, name);
    let reads = delta("ember_cache_device_ring_reads_total");
    let handoffs = delta("ember_cache_device_ring_handoffs_total");
    assert!(reads >= 50.0 * 32.0 * 0.9, "{reads} ring reads for 1,600 READ hits");
    assert!(
        handoffs > 0.0 && reads / handoffs >= 6.0,
        "{reads} ring reads in {handoffs} hand-offs: {:.2} a hand-off",
        reads / handoffs
    );
    eprintln!("{reads} ring reads in {handoffs} hand-offs");
    serve.stop();
}

#[test]
fn a_client_that_reads_its_replies_slowly_gets_every_byte_right() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_direct(dir.path());
    let _c = filled(&serve, 3);
    let before = metric(&scrape(&serve.metrics), "ember_cache_read_hits_total");
    let mut s = small_window_connection(&serve.nbd);
    let (burst, asked) = read_burst(400);
    // The whole burst goes out while the replies pile up unread.
    let sender = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&burst).unwrap())
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut seen = vec![false; asked.len()];
    for i in 0..asked.len() {
        if i % 50 == 0 {
            // Slowly: the server's sends keep finding the socket full.
            std::thread::sleep(Duration::from_millis(20));
        }
        check_reply(&mut s, &asked, 3, &mut seen);
    }
    sender.join().unwrap();
    assert!(seen.iter().all(|&x| x));
    let hits = metric(&scrape(&serve.metrics), "ember_cache_read_hits_total") - before;
    let blocks: u64 = asked.iter().map(|&(_, n)| u64::from(n)).sum();
    assert_eq!(hits, blocks as f64, "every block of every READ a hit");
    serve.stop();
}

#[test]
fn clients_that_vanish_with_replies_half_sent_leave_the_server_serving() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_direct(dir.path());
    let c = filled(&serve, 9);
    for round in 0..12u64 {
        let mut s = small_window_connection(&serve.nbd);
        let (burst, asked) = read_burst(200);
        let sender = {
            let mut w = s.try_clone().unwrap();
            // The write may fail once the client below is gone: that is the point.
            std::thread::spawn(move || {
                let _ = w.write_all(&burst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        // Read a few whole replies, then part of the next one, and go.
        let mut seen = vec![false; asked.len()];
        for _ in 0..(round % 4) * 5 {
            check_reply(&mut s, &asked, 9, &mut seen);
        }
        let mut part = vec![0u8; 100 + 1000 * round as usize];
        s.read_exact(&mut part).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Both);
        drop(s);
        sender.join().unwrap();
    }
    // Every block still reads back right, and the server is alive and serving.
    let mut s = small_window_connection(&serve.nbd);
    let (burst, asked) = read_burst(100);
    s.write_all(&burst).unwrap();
    let mut seen = vec![false; asked.len()];
    for _ in 0..asked.len() {
        check_reply(&mut s, &asked, 9, &mut seen);
    }
    let mut data = vec![0u8; BS];
    for b in 0..BLOCKS {
        c.read(b * BS as u64, &mut data).unwrap();
        assert_eq!(version_of(b, &data), Some(9), "block {b}");
    }
    serve.stop();
}
