//! The shared grid's one index: an entry per key resident in any cell (S3-FIFO's ghosts
//! included), holding every cell's state for that key, so a request costs one hash probe for
//! all cells.

use super::fifo_stamps::FifoStamps;
use ember_policy::keymap::{Bucket, KeyMap};

/// Most sizes a policy can have in one shared grid (one bit or byte per size in an entry).
pub const MAX_SIZES: usize = 8;

/// No entry (an empty link, an unset marker).
pub(crate) const NIL: u32 = u32::MAX;

/// [`Entry::level`] of a key in no LRU cell (outside the recency stack).
pub(crate) const OUT: u8 = 0xff;

/// [`Entry::level`] of a freed entry (on the free list).
const FREE: u8 = 0xfe;

/// Every cell's state of one key: 64 bytes, one cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Entry {
    /// The block key.
    pub key: u64,
    /// LRU: the next more recent entry of the recency stack ([`NIL`] at the top).
    pub prev: u32,
    /// LRU: the next less recent entry ([`NIL`] at the bottom).
    pub next: u32,
    /// LRU: the smallest size (in ascending order) whose cache holds the key; [`OUT`] if none.
    pub level: u8,
    /// CLOCK: bit `i` set if size `i`'s cache holds the key.
    pub clock: u8,
    /// CLOCK: size `i`'s reference bit.
    pub clock_ref: u8,
    /// S3-FIFO, one byte per size: location (bits 0-1: 0 none, 1 small, 2 main, 3 ghost),
    /// access counter (bits 2-3), stale ghost-queue items (bits 4-7).
    pub s3: [u8; MAX_SIZES],
    /// FIFO: size `i`'s insertion counter just after the key's last insertion there
    /// (see [`FifoStamps`]).
    pub fifo: [u32; MAX_SIZES],
}

impl Entry {
    fn new(key: u64) -> Self {
        Self {
            key,
            prev: NIL,
            next: NIL,
            level: OUT,
            clock: 0,
            clock_ref: 0,
            s3: [0; MAX_SIZES],
            fifo: [0; MAX_SIZES],
        }
    }

    /// A new entry for `key`, for tests.
    #[cfg(test)]
    pub fn new_for_test(key: u64) -> Self {
        Self::new(key)
    }

    /// True if no cell (and no queue) holds the key, FIFO's sizes aside.
    #[inline(always)]
    fn is_empty_but_fifo(&self) -> bool {
        self.level == OUT && self.clock == 0 && u64::from_le_bytes(self.s3) == 0
    }
}

/// The fewest entries the slab holds before it is first swept (few in tests, so that the
/// small random traces sweep often).
pub(crate) const SWEEP_MIN: usize = if cfg!(test) { 16 } else { 4096 };

/// Accesses between two sweeps at most, when FIFO sizes are simulated (keeps the stamps'
/// wrapping counters exact: see [`FifoStamps`]).
pub(crate) const SWEEP_EVERY: u64 = 1 << 30;

/// The entries and the index from key to entry.
#[derive(Debug)]
pub(crate) struct Entries {
    pub slab: Vec<Entry>,
    free: Vec<u32>,
    map: KeyMap,
    /// The entry of the access being simulated: never freed until the access is done.
    pub pinned: u32,
    /// FIFO at every size (its state in the entries' stamps).
    pub fifo: FifoStamps,
    /// The slab is swept before it grows past this many entries (FIFO only).
    sweep_at: usize,
}

impl Entries {
    /// Room for `expected` keys before the index first grows; FIFO at `fifo_caps`.
    pub fn new(expected: usize, fifo_caps: &[usize]) -> Self {
        let expected = expected.max(1024);
        Self {
            slab: Vec::with_capacity(expected),
            free: Vec::new(),
            map: KeyMap::with_entries(expected),
            pinned: NIL,
            fifo: FifoStamps::new(fifo_caps),
            sweep_at: SWEEP_MIN,
        }
    }

    /// Entries in the slab, free ones included.
    #[cfg(test)]
    pub fn slab_len(&self) -> usize {
        self.slab.len()
    }

    /// Keys the index holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Start loading the index group of `key`.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// The entry of `key`, created empty if absent; the flag says whether it was created.
    #[inline(always)]
    pub fn get_or_insert(&mut self, key: u64) -> (u32, bool) {
        if self.map.len() >= self.map.max_len() {
            self.grow();
        }
        let slab = &self.slab;
        match self.map.find(key, |s| slab[s as usize].key) {
            Ok(id) => (id, false),
            Err(bucket) => (self.insert_at(bucket, key), true),
        }
    }

    fn insert_at(&mut self, bucket: Bucket, key: u64) -> u32 {
        if self.free.is_empty() && self.slab.len() >= self.sweep_at && !self.fifo.is_none() {
            self.sweep();
        }
        let mut e = Entry::new(key);
        self.fifo.fresh(&mut e);
        let id = match self.free.pop() {
            Some(id) => {
                self.slab[id as usize] = e;
                id
            }
            None => {
                self.slab.push(e);
                (self.slab.len() - 1) as u32
            }
        };
        self.map.insert_at(bucket, id);
        id
    }

    /// Free every entry that no cell holds any more (FIFO's sizes let go of keys without
    /// touching them), renew the others' FIFO stamps, and let the slab grow to twice the
    /// entries still held (at least [`SWEEP_MIN`]) before the next sweep. The slab is read
    /// in order; only the freed keys' index slots are visited.
    #[cold]
    pub fn sweep(&mut self) {
        for id in 0..self.slab.len() {
            let e = &mut self.slab[id];
            if e.level == FREE {
                continue;
            }
            if id as u32 != self.pinned && e.is_empty_but_fifo() && !self.fifo.holds_any(e) {
                let key = e.key;
                e.level = FREE;
                self.map.remove(key, id as u32);
                self.free.push(id as u32);
            } else {
                self.fifo.renew(e);
            }
        }
        let held = self.slab.len() - self.free.len();
        self.sweep_at = held.saturating_mul(2).max(SWEEP_MIN);
    }

    /// Double the index (a grid whose union of keys outgrew the first estimate).
    #[cold]
    fn grow(&mut self) {
        let mut map = KeyMap::with_entries(self.map.max_len().saturating_mul(2));
        for (id, e) in self.slab.iter().enumerate() {
            if e.level != FREE {
                map.insert(e.key, id as u32);
            }
        }
        self.map = map;
    }

    /// Free entry `id` if no cell holds it any more (and it is not the pinned one).
    #[inline(always)]
    pub fn release_if_empty(&mut self, id: u32) {
        let e = &self.slab[id as usize];
        if id != self.pinned && e.is_empty_but_fifo() && !self.fifo.holds_any(e) {
            let key = e.key;
            self.map.remove(key, id);
            self.slab[id as usize].level = FREE;
            self.free.push(id);
        }
    }

    /// Start loading the entry of `key`, if it has one (its index group should be loaded
    /// already: see [`Entries::prefetch`]).
    #[inline(always)]
    pub fn prefetch_entry_of(&self, key: u64) {
        // The first slot whose fingerprint matches, without reading its entry's key (that
        // read would wait for the very load this starts): a rare false match only loads a
        // line for nothing.
        if let Some(id) = self.map.get(key, |s| {
            self.prefetch_entry(s);
            key
        }) {
            let _ = id;
        }
    }

    /// Start loading entry `id` (a victim-to-be: the next eviction will read it).
    #[inline(always)]
    pub fn prefetch_entry(&self, id: u32) {
        if let Some(e) = self.slab.get(id as usize) {
            ember_policy::prefetch::prefetch(e);
        }
    }

    /// Entry `id`.
    #[inline(always)]
    pub fn get(&self, id: u32) -> &Entry {
        &self.slab[id as usize]
    }

    /// Entry `id`, to change.
    #[inline(always)]
    pub fn get_mut(&mut self, id: u32) -> &mut Entry {
        &mut self.slab[id as usize]
    }
}
