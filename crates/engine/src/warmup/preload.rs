//! The preloader (Bonfire section 5.2): a background thread that reads the planned blocks
//! (first those the performance snapshot may give, in the snapshot's order, then the rest
//! from backing in address order) and writes them into the cache while the cache serves.
//!
//! Foreground first: one run at a time (queue depth 1, at most [`CHUNK_BLOCKS`]
//! blocks), and before each run it waits while client requests are in flight (up to 5 ms, so
//! a saturated server still sees the preload advance).
//!
//! Never stale: a run is filled exactly as a read miss fills its blocks. It holds the stripe
//! locks of the run's blocks from the lookup to the last cache write, so no client request on
//! those blocks runs in between; under those locks it allocates only blocks that are not
//! cached (a block a client wrote or read before is cached, or, under write-around, already
//! on backing) and not inside a TRIM's fence, and only while the cache has room (the preload
//! stops when the cache is full rather than evict). A client write that comes later waits for the locks and then overwrites the
//! preloaded copy as it would any cached block. An I/O error ends the preload (the blocks
//! of the failed run are dropped); it never fails a client request. The engine fills each run
//! under its locks ([`Host::preload_run`], `io/warmup_host.rs`); this thread orders the runs
//! and reads the snapshot.

use super::host::Host;
use super::snapshot_plan::SnapCopy;
use super::stats::WarmupState;
use crate::clock::now_ns;
use crate::stripes::CHUNK_BLOCKS;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Where the preload's blocks come from: the performance snapshot for the copies the rules
/// allow (read first, in the snapshot's order: large sequential reads), backing for the rest.
pub(crate) struct Source {
    /// The snapshot file being read (the previous run's).
    pub snapshot: Option<std::fs::File>,
    /// The blocks to take from it, sorted by their offset in it.
    pub copies: Vec<SnapCopy>,
}

/// Run the preload of `runs` ((engine volume, first block, blocks)), the blocks of
/// `source.copies` from the snapshot, until done, `stop`, a full cache, a shutdown or an I/O
/// error. Returns how it ended.
pub(crate) fn run<H: Host>(
    host: &H,
    runs: &[(u32, u64, u64)],
    source: Source,
    stop: &AtomicBool,
) -> String {
    let c = &host.hooks().counters;
    c.preload_start_ns.store(now_ns().max(1), Relaxed);
    c.set_state(WarmupState::Preloading);
    let mut why = String::from("done");
    let mut done: HashSet<(u32, u64)> = HashSet::new();
    if let Some(f) = &source.snapshot {
        if let Err(e) = from_snapshot(host, f, &source.copies, stop, &mut done) {
            why = e;
        }
    }
    let runs = without(runs, &done);
    if why == "done" {
        for &(vol, first, n) in &runs {
            if stop.load(Relaxed) {
                why = "stopped".into();
                break;
            }
            foreground_first(host);
            match host.preload_run(vol, first, n, None) {
                Ok(true) => {}
                Ok(false) => {
                    why = "the cache has no free block left".into();
                    break;
                }
                Err(e) => {
                    why = e;
                    break;
                }
            }
        }
    }
    c.preload_end_ns.store(now_ns().max(1), Relaxed);
    c.set_state(WarmupState::Done);
    why
}

/// Foreground first: let requests in flight finish (bounded wait).
fn foreground_first<H: Host>(host: &H) {
    let t0 = Instant::now();
    while host.requests_in_flight() > 0 && t0.elapsed() < Duration::from_millis(5) {
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// The runs minus the blocks in `done`, merged again.
fn without(runs: &[(u32, u64, u64)], done: &HashSet<(u32, u64)>) -> Vec<(u32, u64, u64)> {
    let mut out: Vec<(u32, u64, u64)> = Vec::new();
    for &(v, first, n) in runs {
        for b in first..first + n {
            if done.contains(&(v, b)) {
                continue;
            }
            match out.last_mut() {
                Some((rv, f, m)) if *rv == v && *f + *m == b && *m < CHUNK_BLOCKS => *m += 1,
                _ => out.push((v, b, 1)),
            }
        }
    }
    out
}

/// Preload the snapshot's copies: read runs of adjacent copies (up to CHUNK_BLOCKS) in one
/// read each, check each copy's CRC, install it. Copies installed, or whose block a client
/// cached first, go into `done`; a copy that fails its CRC stays for backing.
fn from_snapshot<H: Host>(
    host: &H,
    f: &std::fs::File,
    copies: &[SnapCopy],
    stop: &AtomicBool,
    done: &mut HashSet<(u32, u64)>,
) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let c = &host.hooks().counters;
    let bs = host.block_size();
    let mut buf = vec![0u8; (CHUNK_BLOCKS * bs) as usize];
    let mut i = 0;
    while i < copies.len() {
        if stop.load(Relaxed) {
            return Err("stopped".into());
        }
        let mut j = i + 1;
        while j < copies.len()
            && (j - i) < CHUNK_BLOCKS as usize
            && copies[j].offset == copies[j - 1].offset + bs
        {
            j += 1;
        }
        foreground_first(host);
        let data = &mut buf[..(j - i) * bs as usize];
        if f.read_exact_at(data, copies[i].offset).is_err() {
            // A truncated or unreadable snapshot: these blocks come from backing.
            c.snapshot_bad_blocks.fetch_add((j - i) as u64, Relaxed);
            i = j;
            continue;
        }
        for (k, cp) in copies[i..j].iter().enumerate() {
            let d = &data[k * bs as usize..(k + 1) * bs as usize];
            if crc32c::crc32c(d) != cp.crc {
                c.snapshot_bad_blocks.fetch_add(1, Relaxed);
                continue;
            }
            match host.preload_run(cp.volume, cp.block, 1, Some(d)) {
                Ok(true) => {
                    done.insert((cp.volume, cp.block));
                }
                Ok(false) => return Err("the cache has no free block left".into()),
                Err(e) => return Err(e),
            }
        }
        i = j;
    }
    Ok(())
}
