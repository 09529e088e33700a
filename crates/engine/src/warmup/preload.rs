//! The preloader (Bonfire section 5.2): a background thread that reads the planned runs from
//! backing and writes them into the cache while the cache serves.
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

use crate::core::{now_ns, Inner};
use crate::layout::block_key;
use crate::warmup::stats::WarmupState;
use ember_trace::Op;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run the preload of `runs` ((engine volume, first block, blocks)) until done, `stop`, a
/// full cache, a shutdown or an I/O error. Returns how it ended.
pub(crate) fn run(inner: &Arc<Inner>, runs: &[(u32, u64, u64)], stop: &AtomicBool) -> String {
    let c = &inner.warmup.counters;
    c.preload_start_ns.store(now_ns().max(1), Relaxed);
    c.set_state(WarmupState::Preloading);
    let mut why = String::from("done");
    for &(vol, first, n) in runs {
        if stop.load(Relaxed) {
            why = "stopped".into();
            break;
        }
        // Foreground first: let requests in flight finish (bounded wait).
        let t0 = Instant::now();
        while inner.gate.active() > 0 && t0.elapsed() < Duration::from_millis(5) {
            std::thread::sleep(Duration::from_micros(100));
        }
        match run_one(inner, vol, first, n) {
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
    c.preload_end_ns.store(now_ns().max(1), Relaxed);
    c.set_state(WarmupState::Done);
    why
}

/// Preload one run. `Ok(false)`: the cache is full (or the engine is shutting down).
fn run_one(inner: &Arc<Inner>, vol_id: u32, first: u64, n: u64) -> Result<bool, String> {
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
    let result = fill(inner, vol, first, &fills);
    let mut st = inner.state.lock();
    for (i, f) in fills.iter().enumerate() {
        if let Some(cb) = *f {
            if result.is_err() {
                st.invalidate_if(block_key(vol_id, first + i as u64), cb);
            }
            st.unpin(cb);
        }
    }
    drop(st);
    let filled = result?;
    c.preloaded_blocks.fetch_add(filled, Relaxed);
    c.preloaded_bytes.fetch_add(filled * bs, Relaxed);
    Ok(!full)
}

/// Read the span of the allocated blocks from backing in one read, write each run of
/// adjacent cache blocks in one write. Returns the blocks filled.
pub(crate) fn fill(
    inner: &Inner,
    vol: &crate::core::VolumeInfo,
    first: u64,
    fills: &[Option<u32>],
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
    vol.backing
        .read_at(off, data)
        .map_err(|e| format!("reading backing {}: {e}", vol.backing.describe()))?;
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
