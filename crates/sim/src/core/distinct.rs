//! Counting distinct block keys (the working-set size) while a trace streams past, in memory
//! proportional to the blocks touched, never to the trace's length.
//!
//! Block traces address dense ranges, so keys are counted in a paged bitmap: one bit per
//! block, in pages of [`PAGE_BLOCKS`] blocks (4 KiB) created on first touch. If the keys turn
//! out sparse (hashed object ids, say), so that the pages would cost more than a hash set,
//! the counter moves every key seen to a hash set (8 bytes a key plus the table) and goes on
//! there. Either way the count is exact.

use rustc_hash::{FxHashMap, FxHashSet};

/// Blocks per bitmap page.
pub const PAGE_BLOCKS: u64 = 1 << 15;

/// Words per page.
const PAGE_WORDS: usize = (PAGE_BLOCKS / 64) as usize;

/// Pages per region of the page index (a region spans 2^24 blocks).
const REGION_PAGES: usize = 512;

/// Pages reached through [`DistinctCounter`]'s direct table (the first 2^31 blocks: a
/// volume of 8 TiB in 4 KiB blocks, the first volume of an ensemble); keys beyond take the
/// regions' hash map.
const DIRECT_PAGES: usize = 1 << 16;

/// Pages allowed before sparseness is checked: 16 MiB of bitmap, which a dense trace of up
/// to 2^27 blocks (512 GiB of 4 KiB blocks) never exceeds. Checked earlier, keys scattered
/// over a few million blocks looked sparse while their pages were still filling.
const MIN_PAGES: usize = 4096;

/// How many keys ahead [`DistinctCounter::add_all`] starts loading a key's bitmap word.
const PREFETCH_AHEAD: usize = 32;

/// Pages up to which [`DistinctCounter::add_all`] loads nothing ahead: 256 KiB of bitmap
/// (2 M blocks) stays in the core's own cache beside a simulated policy's state, and the
/// prefetch then only costs instructions.
const NEAR_PAGES: usize = 64;

/// An exact streaming counter of distinct `u64` keys.
#[derive(Clone, Debug, Default)]
pub struct DistinctCounter {
    /// Region number (key / (PAGE_BLOCKS * REGION_PAGES)) to its table: for each of its
    /// pages, the index into `pages` plus one (0: no page yet).
    index: FxHashMap<u64, u32>,
    tables: Vec<[u32; REGION_PAGES]>,
    pages: Vec<Box<[u64; PAGE_WORDS]>>,
    /// For the pages below [`DIRECT_PAGES`], the index into `pages` plus one (0: none yet),
    /// grown to the highest such page seen: the common case of a dense trace is one load
    /// here, without the region lookup.
    direct: Vec<u32>,
    /// The region last touched and its table (dense traces stay in one), to skip the hash
    /// lookup.
    last: Option<(u64, u32)>,
    /// Set once the keys proved sparse: every key seen so far lives here instead.
    sparse: Option<FxHashSet<u64>>,
    count: u64,
}

impl DistinctCounter {
    /// An empty counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Distinct keys seen so far.
    pub fn count(&self) -> u64 {
        match &self.sparse {
            Some(s) => s.len() as u64,
            None => self.count,
        }
    }

    /// Bytes of memory the counter holds (pages or hash set, approximately).
    pub fn memory_bytes(&self) -> usize {
        match &self.sparse {
            Some(s) => s.capacity() * 9,
            None => {
                self.pages.len() * (PAGE_WORDS * 8 + 16)
                    + self.tables.len() * REGION_PAGES * 4
                    + self.direct.len() * 4
            }
        }
    }

    /// Count every key of `keys`.
    pub fn add_all(&mut self, keys: &[u64]) {
        if let Some(s) = &mut self.sparse {
            s.extend(keys.iter().copied());
            return;
        }
        if self.pages.len() <= NEAR_PAGES {
            self.add_dense_keys::<false>(keys);
        } else {
            self.add_dense_keys::<true>(keys);
        }
    }

    /// [`DistinctCounter::add_all`] while the keys are counted in pages, loading each key's
    /// bitmap word ahead if `PREFETCH`.
    #[inline(always)]
    fn add_dense_keys<const PREFETCH: bool>(&mut self, keys: &[u64]) {
        for (i, &k) in keys.iter().enumerate() {
            if PREFETCH {
                if let Some(&ahead) = keys.get(i + PREFETCH_AHEAD) {
                    self.prefetch(ahead);
                }
            }
            let bit = k % PAGE_BLOCKS;
            match self.direct.get((k / PAGE_BLOCKS) as usize) {
                Some(&at) if at != 0 => {
                    let word = &mut self.pages[at as usize - 1][(bit / 64) as usize];
                    let m = 1u64 << (bit % 64);
                    self.count += u64::from(*word & m == 0);
                    *word |= m;
                }
                _ => {
                    let pages = self.pages.len();
                    self.add_dense(k);
                    // Judged when a page is added, so one batch never piles up pages: past
                    // MIN_PAGES (16 MiB of them), fewer than 64 keys a page is cheaper in a
                    // hash set (a page costs 4 KiB, an entry about 16 bytes).
                    if self.pages.len() > pages
                        && self.pages.len() > MIN_PAGES
                        && (self.pages.len() as u64) * 64 > self.count
                    {
                        self.go_sparse();
                        if let Some(s) = &mut self.sparse {
                            s.extend(keys[i + 1..].iter().copied());
                        }
                        return;
                    }
                }
            }
        }
    }

    /// Start loading the bitmap word of `k` if its page exists and is in the direct table:
    /// the keys of misses hit a bitmap of a bit per block at random, larger than the core's
    /// own cache on traces of millions of blocks. Changes nothing observable.
    #[inline(always)]
    fn prefetch(&self, k: u64) {
        if let Some(&at) = self.direct.get((k / PAGE_BLOCKS) as usize) {
            if let Some(page) = self.pages.get((at as usize).wrapping_sub(1)) {
                ember_policy::prefetch::prefetch(&page[((k % PAGE_BLOCKS) / 64) as usize]);
            }
        }
    }

    #[inline(always)]
    fn add_dense(&mut self, k: u64) {
        let page = k / PAGE_BLOCKS;
        let region = page / REGION_PAGES as u64;
        let t = match self.last {
            Some((r, t)) if r == region => t,
            _ => {
                let next = self.tables.len() as u32;
                let t = *self.index.entry(region).or_insert(next);
                if t == next {
                    self.tables.push([0u32; REGION_PAGES]);
                }
                self.last = Some((region, t));
                t
            }
        };
        let slot = &mut self.tables[t as usize][(page % REGION_PAGES as u64) as usize];
        if *slot == 0 {
            self.pages.push(Box::new([0u64; PAGE_WORDS]));
            *slot = self.pages.len() as u32;
            if page < DIRECT_PAGES as u64 {
                let p = page as usize;
                if self.direct.len() <= p {
                    self.direct.resize(p + 1, 0);
                }
                self.direct[p] = *slot;
            }
        }
        let at = (*slot - 1) as usize;
        let bit = k % PAGE_BLOCKS;
        let (w, m) = ((bit / 64) as usize, 1u64 << (bit % 64));
        let word = &mut self.pages[at][w];
        self.count += u64::from(*word & m == 0);
        *word |= m;
    }

    fn go_sparse(&mut self) {
        let mut set = FxHashSet::default();
        set.reserve(self.count as usize);
        let tables = &self.tables;
        let pages = self.index.iter().flat_map(|(&region, &t)| {
            tables[t as usize]
                .iter()
                .enumerate()
                .filter(|(_, &i)| i != 0)
                .map(move |(j, &i)| (region * REGION_PAGES as u64 + j as u64, i as usize - 1))
        });
        for (page, i) in pages {
            for (w, &word) in self.pages[i].iter().enumerate() {
                let mut x = word;
                while x != 0 {
                    let b = x.trailing_zeros() as u64;
                    set.insert(page * PAGE_BLOCKS + w as u64 * 64 + b);
                    x &= x - 1;
                }
            }
        }
        self.index = FxHashMap::default();
        self.tables = Vec::new();
        self.pages = Vec::new();
        self.direct = Vec::new();
        self.last = None;
        self.sparse = Some(set);
    }

    /// True once the counter has switched to its hash set.
    pub fn is_sparse(&self) -> bool {
        self.sparse.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn dense_and_sparse_keys_count_like_a_set_in_any_batches() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let dense: Vec<u64> = (0..200_000)
            .map(|_| ember_trace::block_key((next() % 3) as u32, next() % 90_000))
            .collect();
        let sparse: Vec<u64> = (0..200_000).map(|_| next() % 50_000 * 0x1_0000_0001).collect();
        for (keys, want_sparse) in [(dense, false), (sparse, true)] {
            let set: FxHashSet<u64> = keys.iter().copied().collect();
            for batch in [1usize, 1000, 1 << 20] {
                let mut c = DistinctCounter::new();
                for b in keys.chunks(batch) {
                    c.add_all(b);
                }
                assert_eq!(c.count(), set.len() as u64, "batch {batch}");
                assert_eq!(c.is_sparse(), want_sparse, "batch {batch}");
            }
        }
        assert_eq!(DistinctCounter::new().count(), 0);
    }

    /// Keys on both sides of the direct table's end, and pages first met out of order,
    /// count exactly.
    #[test]
    fn direct_pages_and_the_rest_agree_at_the_boundary() {
        let edge = DIRECT_PAGES as u64 * PAGE_BLOCKS;
        let keys: Vec<u64> = [edge + 5, edge - 1, 3, edge, edge - 1, 3, 40 * PAGE_BLOCKS, edge + 5]
            .into_iter()
            .chain((0..5000).map(|i| edge - 2 * PAGE_BLOCKS + (i * 7919) % (4 * PAGE_BLOCKS)))
            .collect();
        let set: FxHashSet<u64> = keys.iter().copied().collect();
        let mut c = DistinctCounter::new();
        for b in keys.chunks(3) {
            c.add_all(b);
        }
        assert_eq!(c.count(), set.len() as u64);
        assert!(!c.is_sparse());
        assert_eq!(c.direct.len(), DIRECT_PAGES);
    }

    /// Found by bench/sim-scale: Zipf keys scattered over 10M blocks touch all
    /// 306 pages within the first few thousand keys, when there are still fewer than 64 keys a
    /// page; judged sparse that early, the counter moved to its hash set and cost a quarter of
    /// `ember sim`'s time. A few megabytes of pages are never worth a hash set.
    #[test]
    fn scattered_keys_over_ten_million_blocks_stay_dense() {
        let mut next = xorshift(0x1234_5678_9abc_def1);
        let mut c = DistinctCounter::new();
        let mut set = FxHashSet::default();
        for _ in 0..200 {
            let batch: Vec<u64> = (0..1024).map(|_| next() % 10_000_000).collect();
            set.extend(batch.iter().copied());
            c.add_all(&batch);
            assert!(!c.is_sparse(), "sparse after {} keys", set.len());
        }
        assert_eq!(c.count(), set.len() as u64);
        assert!(c.memory_bytes() < 2 << 20, "{}", c.memory_bytes());
    }

    #[test]
    fn dense_keys_cost_about_a_bit_a_block() {
        let mut c = DistinctCounter::new();
        let keys: Vec<u64> = (0..1_000_000u64).map(|i| i * 7 % 1_000_000).collect();
        c.add_all(&keys);
        assert_eq!(c.count(), 1_000_000);
        assert!(!c.is_sparse());
        // 31 pages of 4 KiB for a million blocks.
        assert!(c.memory_bytes() < 200_000, "{}", c.memory_bytes());
    }
}
