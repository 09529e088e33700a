//! The shared grid's one index, from key to entry id, and every cell's state of each entry in
//! dense arrays indexed by that id, so a request costs one hash probe for all cells.
//!
//! The state is laid out by what reads it. What every access reads and no queue walks (LRU's
//! place in its log, FIFO's stamps) is one row per entry, a power of two of `u32`s within one
//! cache line; what a policy's queue walks read (CLOCK's two bits per entry, a bitmap per
//! size; S3-FIFO's byte per size) is that policy's own dense array, a few megabytes that stay
//! in the processor's last-level cache while the hand or the evictions step through it.
//! (With one 64-byte line of every cell's state per key, each step of a walk waited for
//! memory; see docs/design/simulator.md.)
//!
//! While every key is below `u32::MAX` (block numbers of volumes under 16 TiB, the
//! generators' keys) the index tags each key with its [`exact_tag`], so a lookup reads the
//! index alone; the first wider key re-tags the index with fingerprints, and lookups then
//! confirm a match by the entry's key, as every policy's index does.
//!
//! An entry no cell holds any more (and no S3-FIFO ghost) is not freed at once: the next sweep
//! of the slab, when it outgrows twice what was held at the last one, frees every such entry
//! together, loading their index groups ahead (freeing at once cost an index probe that
//! waited for memory at most evictions: 44 % of the grid's S3-FIFO samples). Until then a
//! request for its key finds it, empty: a miss for every cell, as for a new key.

use super::fifo_stamps::FifoStamps;
use ember_policy::keymap::{exact_tag, fingerprint, Bucket, KeyMap};
use ember_policy::prefetch::prefetch;

/// No entry (an empty link, an unset marker), and no place in LRU's log.
pub(crate) const NIL: u32 = u32::MAX;

/// The fewest entries the slab holds before it is first swept (few in tests, so that the
/// small random traces sweep often).
pub(crate) const SWEEP_MIN: usize = if cfg!(test) { 16 } else { 4096 };

/// Accesses between two sweeps at most, when FIFO sizes are simulated (keeps the stamps'
/// wrapping counters exact: see [`FifoStamps`]).
pub(crate) const SWEEP_EVERY: u64 = 1 << 30;

/// How far ahead a sweep loads the index groups of the entries it frees.
const FREE_AHEAD: usize = 16;

/// `u32`s a [`Line`] holds.
const LINE: usize = 16;

/// One cache line of rows: a row's stride divides [`LINE`], so no row straddles two lines.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line([u32; LINE]);

/// Which policies the grid simulates (which of the state arrays exist).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Present {
    /// CLOCK sizes (how many).
    pub clock_sizes: usize,
    /// S3-FIFO sizes (how many).
    pub s3_sizes: usize,
}

/// The entries, the index from key to entry, and every policy's state per entry.
#[derive(Debug)]
pub(crate) struct Entries {
    /// The key of each entry id.
    keys: Vec<u64>,
    /// One bit per entry id: set while the id is on the free list.
    freed: Vec<u64>,
    free: Vec<u32>,
    map: KeyMap,
    /// True once a key of `u32::MAX` or more was seen: the index is tagged by fingerprints.
    wide: bool,
    present: Present,
    /// Each entry's row: `[LRU place, FIFO stamp per size..]`, `stride` `u32`s, each within
    /// one cache line.
    rows: Vec<Line>,
    stride: usize,
    /// CLOCK, a bitmap per size with two bits per entry (bit `2 * (id % 32)` of word
    /// `id / 32`: the size's cache holds the key; the next bit: its reference bit).
    pub clock: Vec<Vec<u64>>,
    /// S3-FIFO, one byte per size of each entry (location, access counter, stale ghost-queue
    /// items: see `s3fifo.rs`) at [`Entries::s3_at`].
    pub s3: Vec<u8>,
    /// FIFO at every size (its counters; the stamps are in the rows).
    pub fifo: FifoStamps,
    /// A sweep is due once the slab holds this many entries and none is free.
    sweep_at: usize,
    /// Ids a sweep frees (kept to reuse its memory).
    to_free: Vec<u32>,
}

impl Entries {
    /// Room for `expected` keys before the index first grows; FIFO at `fifo_caps`, and the
    /// arrays of the `present` policies.
    pub fn new(expected: usize, fifo_caps: &[usize], present: Present) -> Self {
        let expected = expected.max(1024);
        let fifo = FifoStamps::new(fifo_caps);
        Self {
            keys: Vec::with_capacity(expected),
            freed: Vec::new(),
            free: Vec::new(),
            map: KeyMap::with_entries(expected),
            wide: false,
            present,
            rows: Vec::new(),
            stride: (1 + fifo.sizes()).next_power_of_two(),
            clock: vec![Vec::new(); present.clock_sizes],
            s3: Vec::new(),
            fifo,
            sweep_at: SWEEP_MIN,
            to_free: Vec::new(),
        }
    }

    /// Entries in the slab, free ones included.
    #[cfg(test)]
    pub fn slab_len(&self) -> usize {
        self.keys.len()
    }

    /// Keys the index holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the index is tagged by fingerprints (a key of `u32::MAX` or more was seen).
    #[cfg(test)]
    pub fn is_wide(&self) -> bool {
        self.wide
    }

    /// Where entry `id`'s S3-FIFO byte of size `i` is in [`Entries::s3`].
    #[inline(always)]
    pub fn s3_at(&self, id: u32, i: usize) -> usize {
        id as usize * self.present.s3_sizes + i
    }

    /// `key`'s tag in the index as it is now: its exact tag while the index is narrow (0 for
    /// a key too wide for it), else its fingerprint.
    #[inline(always)]
    fn tag(&self, key: u64) -> u32 {
        if self.wide {
            fingerprint(key)
        } else {
            exact_tag(key).unwrap_or(0)
        }
    }

    /// Start loading the index group of `key`.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        self.map.prefetch_fp(self.tag(key));
    }

    /// The entry of `key`, created empty if absent; the flag says whether it was created.
    #[inline(always)]
    pub fn get_or_insert(&mut self, key: u64) -> (u32, bool) {
        if self.map.len() >= self.map.max_len() {
            self.grow();
        }
        let found = if self.wide {
            let keys = &self.keys;
            self.map.find(key, |s| keys[s as usize])
        } else {
            match exact_tag(key) {
                Some(t) => self.map.find_exact(t),
                None => {
                    self.widen();
                    let keys = &self.keys;
                    self.map.find(key, |s| keys[s as usize])
                }
            }
        };
        match found {
            Ok(id) => (id, false),
            Err(bucket) => (self.insert_at(bucket, key), true),
        }
    }

    fn is_freed(&self, id: usize) -> bool {
        self.freed[id / 64] >> (id % 64) & 1 != 0
    }

    fn set_freed(&mut self, id: usize, on: bool) {
        if on {
            self.freed[id / 64] |= 1 << (id % 64);
        } else {
            self.freed[id / 64] &= !(1 << (id % 64));
        }
    }

    fn insert_at(&mut self, bucket: Bucket, key: u64) -> u32 {
        let id = match self.free.pop() {
            Some(id) => {
                self.keys[id as usize] = key;
                self.set_freed(id as usize, false);
                id
            }
            None => {
                let id = self.keys.len();
                self.keys.push(key);
                if id.is_multiple_of(64) {
                    self.freed.push(0);
                }
                if (id * self.stride).is_multiple_of(LINE) {
                    self.rows.push(Line([0; LINE]));
                }
                if id.is_multiple_of(32) {
                    for bits in &mut self.clock {
                        bits.push(0);
                    }
                }
                self.s3.resize(self.s3.len() + self.present.s3_sizes, 0);
                id as u32
            }
        };
        // A freed entry's state is all clear (that is why it was freed), but for LRU's place
        // (set here) and FIFO's stamps, which a new key starts expired.
        let row = Self::row_in(&mut self.rows, self.stride, id);
        row[0] = NIL;
        let n = self.fifo.sizes();
        self.fifo.fresh(&mut row[1..1 + n]);
        self.map.insert_at(bucket, id);
        id
    }

    /// True when the slab has no free entry left and has grown past twice what was held at
    /// the last sweep: time for [`Entries::sweep`].
    #[inline(always)]
    pub fn wants_sweep(&self) -> bool {
        self.free.is_empty() && self.keys.len() >= self.sweep_at
    }

    /// Entry `id`'s row.
    #[inline(always)]
    fn row(&self, id: u32) -> &[u32] {
        let at = id as usize * self.stride;
        &self.rows[at / LINE].0[at % LINE..at % LINE + self.stride]
    }

    /// Entry `id`'s row in `rows` of `stride`, to change.
    #[inline(always)]
    fn row_in(rows: &mut [Line], stride: usize, id: u32) -> &mut [u32] {
        let at = id as usize * stride;
        &mut rows[at / LINE].0[at % LINE..at % LINE + stride]
    }

    /// Entry `id`'s place in LRU's log ([`NIL`]: in no LRU cell).
    #[inline(always)]
    pub fn lru_place(&self, id: u32) -> u32 {
        self.row(id)[0]
    }

    /// Set entry `id`'s place in LRU's log.
    #[inline(always)]
    pub fn set_lru_place(&mut self, id: u32, place: u32) {
        Self::row_in(&mut self.rows, self.stride, id)[0] = place;
    }

    /// Simulate an access to entry `id` at every FIFO size.
    #[inline(always)]
    pub fn fifo_access(&mut self, id: u32, write: bool) {
        let n = self.fifo.sizes();
        let row = Self::row_in(&mut self.rows, self.stride, id);
        self.fifo.access(&mut row[1..1 + n], write);
    }

    /// True if no cell (and no queue) holds entry `id`.
    #[inline(always)]
    fn is_empty(&self, id: usize) -> bool {
        let p = self.present;
        let row = self.row(id as u32);
        row[0] == NIL
            && self.clock.iter().all(|bits| bits[id / 32] >> (2 * (id % 32)) & 1 == 0)
            && self.s3[id * p.s3_sizes..(id + 1) * p.s3_sizes].iter().all(|&b| b == 0)
            && !self.fifo.holds_any(&row[1..1 + self.fifo.sizes()])
    }

    /// Free every entry that no cell holds any more, renew the others' FIFO stamps, and let
    /// the slab grow to twice the entries still held (at least [`SWEEP_MIN`]) before the next
    /// sweep. The slab is read in order; the freed keys' index groups are loaded
    /// [`FREE_AHEAD`] entries ahead of their removal.
    #[cold]
    pub fn sweep(&mut self) {
        let n = self.fifo.sizes();
        let mut to_free = std::mem::take(&mut self.to_free);
        to_free.clear();
        for id in 0..self.keys.len() {
            if self.is_freed(id) {
                continue;
            }
            if self.is_empty(id) {
                to_free.push(id as u32);
            } else if n > 0 {
                let row = Self::row_in(&mut self.rows, self.stride, id as u32);
                self.fifo.renew(&mut row[1..1 + n]);
            }
        }
        for (j, &id) in to_free.iter().enumerate() {
            if let Some(&a) = to_free.get(j + FREE_AHEAD) {
                self.map.prefetch_fp(self.tag(self.keys[a as usize]));
            }
            let fp = self.tag(self.keys[id as usize]);
            self.map.remove_fp(fp, id);
            self.set_freed(id as usize, true);
            self.free.push(id);
        }
        self.to_free = to_free;
        let held = self.keys.len() - self.free.len();
        self.sweep_at = held.saturating_mul(2).max(SWEEP_MIN);
    }

    /// Tag every key by its fingerprint from now on (the first key of `u32::MAX` or more arrived).
    #[cold]
    #[inline(never)]
    fn widen(&mut self) {
        self.wide = true;
        self.rebuild(self.map.max_len());
    }

    /// Double the index (a grid whose union of keys outgrew the first estimate).
    #[cold]
    fn grow(&mut self) {
        self.rebuild(self.map.max_len().saturating_mul(2));
    }

    /// A new index of room for `entries` keys, tagged as [`Entries::tag`] says.
    fn rebuild(&mut self, entries: usize) {
        let mut map = KeyMap::with_entries(entries);
        for (id, &key) in self.keys.iter().enumerate() {
            if !self.is_freed(id) {
                map.insert_fp(self.tag(key), id as u32);
            }
        }
        self.map = map;
    }

    /// Start loading entry `id`'s CLOCK bits, at every size.
    #[inline(always)]
    pub fn prefetch_clock(&self, id: u32) {
        for bits in &self.clock {
            if let Some(w) = bits.get(id as usize / 32) {
                prefetch(w);
            }
        }
    }

    /// Start loading entry `id`'s S3-FIFO bytes.
    #[inline(always)]
    pub fn prefetch_s3(&self, id: u32) {
        if let Some(b) = self.s3.get(id as usize * self.present.s3_sizes) {
            prefetch(b);
        }
    }

    /// Start loading entry `id`'s row (LRU's and FIFO's state).
    #[inline(always)]
    pub fn prefetch_row(&self, id: u32) {
        if let Some(r) = self.rows.get(id as usize * self.stride / LINE) {
            prefetch(r);
        }
    }
}
