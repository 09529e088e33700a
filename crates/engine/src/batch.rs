//! Batch allocation for the discrete sieves in the real cache (SieveStore, ISCA 2010,
//! section 3.2: SieveStore-D and RandSieve-BlkD): at the end of each epoch the sieve's
//! choice becomes the cache's contents for the next epoch, by the rule `ember sievestore`'s
//! batch manager applies too ([`ember_policy::admission::install()`]).
//!
//! - Epochs are counted from the first access the sieve observed (`--epoch` long each).
//! - At an epoch's end, under the state lock, the sieve's choice is cut to the cache's
//!   capacity ([`ember_policy::admission::install()`]); every resident clean block not chosen
//!   leaves (counted as an eviction); a chosen block already resident stays (a *cancelled
//!   move*, counted).
//! - The moves (chosen blocks not resident) are staged in the background: sorted, merged
//!   into runs of adjacent blocks, and each run filled exactly as a read miss fills (it
//!   holds the run's stripe locks from the lookup to the last cache write, so a client
//!   request on those blocks waits or goes first; a block that became resident meanwhile
//!   is skipped). Foreground first: before each run the mover waits while client requests
//!   are in flight (up to 5 ms a run, so a saturated server still sees the batch advance).
//! - Within an epoch nothing is allocated or replaced: the sieve admits no miss.
//!
//! Only under write-through and write-around (`ember serve` refuses the discrete sieves
//! under write-back: a dirty block cannot simply leave at an epoch's end).

use crate::clock::now_ns;
use crate::core::Inner;
use crate::layout::{block_key, key_block, key_volume};
use ember_policy::admission;
use ember_policy::Admission as _;
use ember_trace::Op;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The epoch thread: waits for the first access, then ends an epoch every `epoch_ns` and
/// installs the sieve's choice, until the engine stops.
pub(crate) fn epoch_thread(inner: Arc<Inner>, epoch_ns: u64) {
    let origin = loop {
        let mut st = inner.state.lock();
        if st.stop || st.closing {
            return;
        }
        if let Some(o) = st.admission.epoch_origin() {
            break o;
        }
        inner.cv.wait_for(&mut st, Duration::from_millis(1));
    };
    let mut k = 1u64;
    loop {
        let boundary = origin.saturating_add(k.saturating_mul(epoch_ns));
        let chosen = {
            let mut st = inner.state.lock();
            loop {
                if st.stop || st.closing {
                    return;
                }
                let now = now_ns();
                if now >= boundary {
                    break;
                }
                let left = Duration::from_nanos(boundary - now).min(Duration::from_millis(50));
                inner.cv.wait_for(&mut st, left);
            }
            st.admission.end_epoch().unwrap_or_default()
        };
        install(&inner, chosen);
        k += 1;
    }
}

/// Make `chosen` (most wanted first) the cache's contents by the discrete sieves' rule
/// ([`ember_policy::admission::install()`]): evict what was not chosen, then move the chosen
/// blocks in.
fn install(inner: &Arc<Inner>, chosen: Vec<(u64, u64)>) {
    let cap = inner.geometry.data_blocks as usize;
    let mut moves = {
        let mut st = inner.state.lock();
        let next = admission::install(chosen, cap, |k| st.get(k).is_some());
        for e in st.entries() {
            if !next.keeps(e.key) && st.invalidate(e.key) {
                if let Some(c) = inner.counters.get(key_volume(e.key) as usize) {
                    c.evictions.fetch_add(1, Relaxed);
                }
            }
        }
        for &k in &next.cancelled {
            if let Some(c) = inner.counters.get(key_volume(k) as usize) {
                c.cancelled_moves.fetch_add(1, Relaxed);
            }
        }
        next.moves
    };
    moves.sort_unstable();
    let mut i = 0;
    while i < moves.len() {
        let (vol, first) = (key_volume(moves[i]), key_block(moves[i]));
        let mut n = 1u64;
        while i + (n as usize) < moves.len()
            && n < crate::CHUNK_BLOCKS
            && moves[i + n as usize] == block_key(vol, first + n)
        {
            n += 1;
        }
        let t0 = Instant::now();
        while inner.gate.active() > 0 && t0.elapsed() < Duration::from_millis(5) {
            std::thread::sleep(Duration::from_micros(100));
        }
        if !move_run(inner, vol, first, n) {
            return;
        }
        i += n as usize;
    }
}

/// Move one run of chosen blocks into the cache. False when the engine is stopping or an
/// I/O error ended the batch (the blocks not moved are simply not cached this epoch).
fn move_run(inner: &Arc<Inner>, vol_id: u32, first: u64, n: u64) -> bool {
    let Some(_pass) = inner.gate.enter() else { return false };
    let Some(vol) = inner.volume_by_id(vol_id) else { return true };
    let _held = match inner.stripes.lock(vol_id, first..first + n) {
        Ok(h) => h,
        Err(_) => return false,
    };
    let mut fills: Vec<Option<u32>> = vec![None; n as usize];
    {
        let mut st = inner.state.lock();
        let now = now_ns();
        for i in 0..n {
            let key = block_key(vol_id, first + i);
            if !vol.caching() || st.get(key).is_some() || st.fenced(key) {
                continue;
            }
            let acc = st.access(key, Op::Read, now);
            fills[i as usize] = st.allocate(&acc).cache_block;
        }
        inner.count_evictions(&mut st);
    }
    let result = crate::io::fill::fill(inner, &vol, first, &fills, None);
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
    match result {
        Ok(filled) => {
            if let Some(c) = inner.counters.get(vol_id as usize) {
                c.allocation_writes.fetch_add(filled, Relaxed);
                c.cache_write_bytes.fetch_add(filled * inner.block_size(), Relaxed);
            }
            true
        }
        Err(_) => false,
    }
}
