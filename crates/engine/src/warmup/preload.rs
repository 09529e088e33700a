//! The preloader (Bonfire section 5.2): a background thread that reads the planned blocks
//! (first those the performance snapshot may give, in the snapshot's order, then the rest
//! from backing in address order) and writes them into the cache while the cache serves.
//!
//! Foreground first: one run at a time (queue depth 1, at most [`crate::CHUNK_BLOCKS`]
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
//! of the failed run are dropped); it never fails a client request.

use super::snapshot_plan::SnapCopy;
use crate::core::{now_ns, Inner};
use crate::layout::block_key;
use crate::warmup::stats::WarmupState;
use ember_trace::Op;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
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
pub(crate) fn run(
    inner: &Arc<Inner>,
    runs: &[(u32, u64, u64)],
    source: Source,
    stop: &AtomicBool,
) -> String {
    let c = &inner.warmup.counters;
    c.preload_start_ns.store(now_ns().max(1), Relaxed);
    c.set_state(WarmupState::Preloading);
    let mut why = String::from("done");
    let mut done: HashSet<(u32, u64)> = HashSet::new();
    if let Some(f) = &source.snapshot {
        if let Err(e) = from_snapshot(inner, f, &source.copies, stop, &mut done) {
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
            foreground_first(inner);
            match run_one(inner, vol, first, n, None) {
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
fn foreground_first(inner: &Inner) {
    let t0 = Instant::now();
    while inner.gate.active() > 0 && t0.elapsed() < Duration::from_millis(5) {
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
                Some((rv, f, m)) if *rv == v && *f + *m == b && *m < crate::CHUNK_BLOCKS => *m += 1,
                _ => out.push((v, b, 1)),
            }
        }
    }
    out
}

/// Preload the snapshot's copies: read runs of adjacent copies (up to CHUNK_BLOCKS) in one
/// read each, check each copy's CRC, install it. Copies installed, or whose block a client
/// cached first, go into `done`; a copy that fails its CRC stays for backing.
fn from_snapshot(
    inner: &Arc<Inner>,
    f: &std::fs::File,
    copies: &[SnapCopy],
    stop: &AtomicBool,
    done: &mut HashSet<(u32, u64)>,
) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let c = &inner.warmup.counters;
    let bs = inner.block_size();
    let mut buf = vec![0u8; (crate::CHUNK_BLOCKS * bs) as usize];
    let mut i = 0;
    while i < copies.len() {
        if stop.load(Relaxed) {
            return Err("stopped".into());
        }
        let mut j = i + 1;
        while j < copies.len()
            && (j - i) < crate::CHUNK_BLOCKS as usize
            && copies[j].offset == copies[j - 1].offset + bs
        {
            j += 1;
        }
        foreground_first(inner);
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
            match run_one(inner, cp.volume, cp.block, 1, Some(d)) {
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

/// Preload one run, from `data` (its blocks' bytes, from the snapshot) or else from backing.
/// `Ok(false)`: the cache is full (or the engine is shutting down).
fn run_one(
    inner: &Arc<Inner>,
    vol_id: u32,
    first: u64,
    n: u64,
    data: Option<&[u8]>,
) -> Result<bool, String> {
    let Some(_pass) = inner.gate.enter() else {
        return Err("the cache is shutting down".into());
    };
    let Some(vol) = inner.volume_by_id(vol_id) else { return Ok(true) };
    let bs = inner.block_size();
    let n = n.min((vol.size / bs).saturating_sub(first));
    if n == 0 {
        return Ok(true);
    }
    let _held = inner.stripes.lock(vol_id, first..first + n).map_err(|e| e.to_string())?;
    let c = &inner.warmup.counters;
    let mut fills: Vec<Option<u32>> = vec![None; n as usize];
    let mut full = false;
    {
        let mut st = inner.state.lock();
        let now = now_ns();
        for i in 0..n {
            let key = block_key(vol_id, first + i);
            if st.get(key).is_some() || st.fenced(key) {
                c.skipped_blocks.fetch_add(1, Relaxed);
                continue;
            }
            // Only into room the cache has: the preload evicts nothing a client brought in.
            if st.len() as u64 >= inner.geometry.data_blocks {
                full = true;
                break;
            }
            let acc = st.access(key, Op::Read, now);
            let a = st.allocate(&acc);
            if a.cache_block.is_none() {
                full = true;
                break;
            }
            fills[i as usize] = a.cache_block;
        }
        inner.count_evictions(&mut st);
    }
    let result = fill(inner, vol, first, &fills, data);
    let mut st = inner.state.lock();
    for (i, f) in fills.iter().enumerate() {
        if let Some(cb) = *f {
            if result.is_err() {
                st.invalidate_if(block_key(vol_id, first + i as u64), cb);
            } else {
                st.mark_preloaded(cb);
            }
            st.unpin(cb);
        }
    }
    drop(st);
    let filled = result?;
    if data.is_some() {
        c.preloaded_snapshot_blocks.fetch_add(filled, Relaxed);
    }
    c.preloaded_blocks.fetch_add(filled, Relaxed);
    c.preloaded_bytes.fetch_add(filled * bs, Relaxed);
    Ok(!full)
}

/// Read the span of the allocated blocks from backing in one read (or take it from `given`),
/// write each run of adjacent cache blocks in one write. Returns the blocks filled.
pub(crate) fn fill(
    inner: &Inner,
    vol: &crate::core::VolumeInfo,
    first: u64,
    fills: &[Option<u32>],
    given: Option<&[u8]>,
) -> Result<u64, String> {
    let bs = inner.block_size() as usize;
    let (Some(lo), Some(hi)) =
        (fills.iter().position(Option::is_some), fills.iter().rposition(Option::is_some))
    else {
        return Ok(0);
    };
    let mut buf = crate::device::AlignedBuf::new((hi + 1 - lo) * bs);
    let data = buf.as_mut_slice();
    let off = (first + lo as u64) * bs as u64;
    match given {
        Some(g) => data.copy_from_slice(&g[lo * bs..(hi + 1) * bs]),
        None => vol
            .backing
            .read_at(off, data)
            .map_err(|e| format!("reading backing {}: {e}", vol.backing.describe()))?,
    }
    let mut i = lo;
    let mut filled = 0u64;
    while i <= hi {
        let Some(cb) = fills[i] else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j <= hi && fills[j].is_some_and(|x| Some(x) == cb.checked_add((j - i) as u32)) {
            j += 1;
        }
        let src = &data[(i - lo) * bs..(j - lo) * bs];
        inner
            .cache
            .write_at(inner.geometry.block_offset(cb), src)
            .map_err(|e| format!("writing the cache device {}: {e}", inner.cache.describe()))?;
        filled += (j - i) as u64;
        i = j;
    }
    Ok(filled)
}
