//! The server's hit path: a READ the export serves at once is read into the
//! connection reader's reusable reply buffer and sent from it, so a stream of 4 KiB reads
//! makes no heap allocation in the server (before: the reply `Vec` of every READ, zeroed,
//! 1.0 allocations per request or more). Counted by a global allocator over the whole process
//! while a raw client that allocates nothing itself reads; every reply is checked byte for
//! byte, with simple and structured replies, one request at a time and pipelined.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::nbd::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only
// two static atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SIZE: u64 = 1 << 20;
const BS: usize = 4096;
const READS: u64 = 3000;

/// A READ request's header.
fn header(cookie: u64, offset: u64, length: u32) -> [u8; 28] {
    request_header(0, 0, cookie, offset, length)
}

/// Read one reply to a 4 KiB READ into `data`; returns its cookie. Panics on an error reply.
fn reply(raw: &mut Raw, structured: bool, data: &mut [u8; BS]) -> (u64, u64) {
    if structured {
        let mut h = [0u8; 20 + 8];
        raw.s.read_exact(&mut h).expect("chunk header");
        assert_eq!(&h[0..4], &0x668e_33efu32.to_be_bytes(), "structured reply magic");
        assert_eq!(u16::from_be_bytes([h[4], h[5]]), 1, "DONE");
        assert_eq!(u16::from_be_bytes([h[6], h[7]]), 1, "OFFSET_DATA");
        assert_eq!(u32::from_be_bytes(h[16..20].try_into().unwrap()), 8 + BS as u32);
        raw.s.read_exact(data).expect("data");
        let offset = u64::from_be_bytes(h[20..28].try_into().unwrap());
        (u64::from_be_bytes(h[8..16].try_into().unwrap()), offset)
    } else {
        let mut h = [0u8; 16];
        raw.s.read_exact(&mut h).expect("reply header");
        assert_eq!(&h[0..4], &0x6744_6698u32.to_be_bytes(), "simple reply magic");
        assert_eq!(u32::from_be_bytes(h[4..8].try_into().unwrap()), 0, "no error");
        raw.s.read_exact(data).expect("data");
        (u64::from_be_bytes(h[8..16].try_into().unwrap()), u64::MAX)
    }
}

/// `READS` 4 KiB reads at `depth` requests in flight; returns allocations per read.
fn run(structured: bool, depth: u64) -> f64 {
    let (server, export) = serve_mem("disk", SIZE);
    let content = pattern(7, SIZE as usize);
    use ember_nbd::Export;
    export.write(0, &content, false).unwrap();
    let (mut raw, size, _) = Raw::go(server.tcp, "disk", structured);
    assert_eq!(size, SIZE);
    let blocks = SIZE / BS as u64;
    let offset_of = |cookie: u64| (cookie * 7919 % blocks) * BS as u64;
    let mut data = [0u8; BS];
    let mut wrong = 0u64;
    // Warm up (thread-local buffers, lazily created state), then count.
    for cookie in 0..depth {
        raw.s.write_all(&header(cookie, offset_of(cookie), BS as u32)).unwrap();
    }
    for _ in 0..depth {
        reply(&mut raw, structured, &mut data);
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let mut next = 0;
    for cookie in 0..depth {
        raw.s.write_all(&header(cookie, offset_of(cookie), BS as u32)).unwrap();
        next = cookie + 1;
    }
    for _ in 0..READS {
        let (cookie, echoed) = reply(&mut raw, structured, &mut data);
        let off = offset_of(cookie) as usize;
        wrong += u64::from(data[..] != content[off..off + BS]);
        if structured && echoed != off as u64 {
            wrong += 1;
        }
        if next < READS {
            raw.s.write_all(&header(next, offset_of(next), BS as u32)).unwrap();
            next += 1;
        }
    }
    COUNTING.store(false, Ordering::SeqCst);
    let n = ALLOCATIONS.load(Ordering::SeqCst) - before;
    assert_eq!(wrong, 0, "every reply carried its block's bytes");
    drop(raw);
    server.stop();
    n as f64 / READS as f64
}

// One test (the counter is process-wide: tests running in parallel would count each other).
#[test]
fn a_stream_of_reads_allocates_nothing_in_the_server() {
    for (structured, depth) in [(false, 1), (true, 1), (false, 8), (true, 8)] {
        let per_read = run(structured, depth);
        assert!(
            per_read < 0.05,
            "structured {structured}, depth {depth}: {per_read:.3} allocations per READ"
        );
    }
}
