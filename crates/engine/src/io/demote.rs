//! Wong & Wilkes' DEMOTE in the real cache (docs/guide/demote.md "Two real tiers"):
//!
//! - the **client tier** ([`Volume::send_demote`]): every clean block evicted to make room
//!   is handed to backing as a DEMOTE, when backing takes them (an NBD export that granted
//!   `x-ember:demote`), before anything is written over its data: the victim of a read
//!   miss, of a write-through write miss, and of a write-back write, miss or hit (a write
//!   hit's new version takes a new block, no-overwrite), as
//!   `ember_policy::demote::new_version_room` has the laboratory's client do too (Wong & Wilkes
//!   1.1: a client demotes the clean blocks it ejects). Dirty blocks are never evicted, so
//!   never demoted. Under the write-back policies the policy's victim is rarely the block
//!   freed (dirty blocks hold part of the cache, so the policy is seldom full): a request
//!   then takes the block of the oldest clean block, which is demoted all the same. A
//!   block of the chunk being written is not demoted (its new version is on its way).
//! - the **array tier** ([`Volume::demote`]): a DEMOTE received is placed by the replacement
//!   policy, which is then one of the array schemes (`ember_policy::demote::ArrayReplacement`,
//!   the simulator's `ArrayCache`); a stored block is written to the cache device as a clean
//!   block. A DEMOTE never reaches backing. When the cache is full and the block of the
//!   victim the scheme ejects is still pinned by a request in flight (the fill of a block
//!   another client's READ just missed, which the DEMOTE scheme puts at the discard end and
//!   so ejects at the next DEMOTE), the DEMOTE takes that block all the same and writes it
//!   once the request lets go, so that the array stores what the simulator stores; it is
//!   aborted for want of room only if the request holds the block past
//!   [`PINNED_VICTIM_WAIT`].

use super::ctx::Volume;
use crate::clock::now_ns;
use crate::error::EngineError;
use crate::layout::{block_key, key_block, key_volume};
use crate::state::{CacheState, DemoteStep, TakenBlock};
use ember_trace::Op;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The longest a DEMOTE waits for the requests in flight on its victim's cache block (a
/// fill reading the array's backing, a hit reading the cache device) before it is aborted
/// for want of room: a few backing reads of a slow disk.
const PINNED_VICTIM_WAIT: Duration = Duration::from_secs(1);

impl Volume {
    /// Whether an evicted `key` goes down as a DEMOTE: its volume's backing takes them.
    pub(super) fn demotes_to_backing(&self, key: u64) -> bool {
        self.inner.volume_by_id(key_volume(key)).is_some_and(|v| v.backing.takes_demotes())
    }

    /// A write-back write's blocks: reserve one for the new version of each block of the
    /// chunk `first..first + n` of volume `vol` into `got` (pinned, unmapped), stopping short
    /// when no block can be freed. Returns each clean block ejected for one of them that goes
    /// down as a DEMOTE (client tier), with the block its data is still in: the caller sends
    /// them ([`Volume::send_demote`]) before writing over those blocks, or forgets them if it
    /// lets the blocks go. A block of the chunk itself is not demoted (its new version is on
    /// its way).
    pub(super) fn reserve_new_versions(
        &self,
        st: &mut CacheState,
        (vol, first, n): (u32, u64, usize),
        got: &mut Vec<u32>,
    ) -> Vec<(u64, u32)> {
        let chunk = block_key(vol, first)..block_key(vol, first + n as u64);
        let mut demotes = Vec::new();
        while got.len() < n {
            let key = block_key(vol, first + got.len() as u64);
            let Some((c, ejected)) = st.reserve_for_write(key) else { break };
            got.push(c);
            if let Some(v) = ejected.filter(|v| !chunk.contains(v)) {
                if self.demotes_to_backing(v) {
                    demotes.push((v, c));
                }
            }
        }
        demotes
    }

    /// Client tier: DEMOTE evicted `key`, whose data is still in cache block `c` (pinned by
    /// the caller's fill, not yet overwritten). Counted as sent or dropped on the victim's
    /// volume.
    pub(super) fn send_demote(&self, key: u64, c: u32) {
        let inner = &self.inner;
        let Some(vol) = inner.volume_by_id(key_volume(key)) else { return };
        let Some(ctr) = inner.counters.get(key_volume(key) as usize) else { return };
        let bs = inner.block_size();
        let off = key_block(key) * bs;
        let len = bs.min(vol.size.saturating_sub(off)) as usize;
        let mut buf = vec![0u8; len];
        let sent = inner.cache.read_at(inner.geometry.block_offset(c), &mut buf).is_ok()
            && vol.backing.demote(off, &buf);
        if sent {
            ctr.cache_read_bytes.fetch_add(len as u64, Relaxed);
            ctr.demotes_sent.fetch_add(1, Relaxed);
        } else {
            ctr.demotes_dropped.fetch_add(1, Relaxed);
        }
    }

    /// Whether this volume's cache takes DEMOTEs: its replacement policy is an array scheme
    /// that demotes (`--array-scheme` other than none-lru).
    pub fn accepts_demote(&self) -> bool {
        self.inner.state.lock().replacement.takes_demotes()
    }

    /// Array tier: a client DEMOTEs `data`, its clean copy of the bytes at `offset`. Each
    /// whole cache block the range covers is offered to the replacement policy, which places
    /// it as its scheme says; a stored block is written to the cache device. Partial blocks
    /// are ignored. The data never goes to backing. `fresh(block)` says whether the copy may
    /// be kept (the stale rule of several clients, docs/design/architecture.md); it is asked under
    /// the
    /// block's stripe lock, so no write to the block runs between the answer and the store.
    pub fn demote(
        &self,
        offset: u64,
        data: &[u8],
        fresh: &dyn Fn(u64) -> bool,
    ) -> Result<(), EngineError> {
        let _pass = self.enter()?;
        self.check(offset, data.len() as u64)?;
        // Degraded: nothing is placed (a DEMOTE is a hint; the data is on backing already).
        if self.degraded() {
            return Ok(());
        }
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let end = offset + data.len() as u64;
        let first = offset.div_ceil(bs);
        let stop = end / bs;
        for b in first..stop {
            if !self.cacheable(b) {
                continue;
            }
            ctr.demotes_received.fetch_add(1, Relaxed);
            let _held = inner.stripes.lock(vol.id, b..b + 1).map_err(|e| self.fail(e))?;
            if !fresh(b) {
                ctr.demotes_refused_stale.fetch_add(1, Relaxed);
                continue;
            }
            let key = block_key(vol.id, b);
            let step = {
                let mut st = inner.state.lock();
                if !vol.caching() {
                    // Uncached (or being uncached): nothing is stored, as with no room.
                    DemoteStep::NoRoom
                } else {
                    let acc = st.access(key, Op::Read, now_ns());
                    let (step, evicted) = st.demote_install(&acc);
                    if evicted.is_some() {
                        ctr.evictions.fetch_add(1, Relaxed);
                    }
                    inner.count_evictions(&mut st);
                    step
                }
            };
            match step {
                DemoteStep::NotTaken => {
                    return Err(EngineError::Invalid(
                        "this cache takes no DEMOTE (start it with --array-scheme)".into(),
                    ))
                }
                DemoteStep::Cached => {
                    ctr.demotes_aborted_cached.fetch_add(1, Relaxed);
                }
                DemoteStep::NoRoom => {
                    ctr.demotes_aborted_no_room.fetch_add(1, Relaxed);
                }
                DemoteStep::Refused => {
                    ctr.demotes_refused_sieve.fetch_add(1, Relaxed);
                }
                DemoteStep::Stored(c) | DemoteStep::StoredAfterPins(c) => {
                    let turn = match step {
                        DemoteStep::StoredAfterPins(_) => self.taken_turn(c, key),
                        _ => TakenBlock::Write,
                    };
                    let lo = (b * bs - offset) as usize;
                    let written = turn == TakenBlock::Write
                        && inner
                            .cache
                            .write_at(inner.geometry.block_offset(c), &data[lo..lo + bs as usize])
                            .is_ok();
                    let mut st = inner.state.lock();
                    match turn {
                        TakenBlock::Write if written => {
                            ctr.demotes_stored.fetch_add(1, Relaxed);
                            ctr.cache_write_bytes.fetch_add(bs, Relaxed);
                        }
                        TakenBlock::Write => {
                            if st.invalidate_if(key, c) {
                                ctr.invalidations.fetch_add(1, Relaxed);
                            }
                        }
                        // Stored, and evicted since by the scheme (before its bytes landed).
                        TakenBlock::Gone => {
                            ctr.demotes_stored.fetch_add(1, Relaxed);
                        }
                        TakenBlock::GaveUp | TakenBlock::Wait => {
                            ctr.demotes_aborted_no_room.fetch_add(1, Relaxed);
                        }
                    }
                    st.unpin(c);
                }
            }
        }
        Ok(())
    }

    /// A DEMOTE (or a READ miss's fill) took cache block `c` for `key` from a victim that
    /// requests in flight still pin ([`DemoteStep::StoredAfterPins`],
    /// `Allocation::after_pins`): wait for its turn ([`CacheState::taken_block_ready`]), at
    /// most [`PINNED_VICTIM_WAIT`]. The caller holds its own block's stripe lock, and no pin
    /// holder waits for it: the victim is another block, and its requests only finish their
    /// I/O (or their own turn) and unpin.
    ///
    /// [`CacheState::taken_block_ready`]: crate::state::CacheState::taken_block_ready
    pub(super) fn taken_turn(&self, c: u32, key: u64) -> TakenBlock {
        let deadline = Instant::now() + PINNED_VICTIM_WAIT;
        loop {
            let give_up = Instant::now() >= deadline;
            let turn = self.inner.state.lock().taken_block_ready(c, key, give_up);
            if turn != TakenBlock::Wait {
                return turn;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
