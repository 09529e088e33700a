//! Exact reuse distance in O(n log n) (Bonfire Figure 3; Mattson's LRU stack distance).
//!
//! The reuse distance of an access is the number of distinct blocks accessed between it and
//! the previous access to the same block (a,b,c,a: 2 for the second a); a first access has
//! none (infinite). It equals the block's depth in an LRU stack, so an LRU cache of `s`
//! blocks hits exactly the accesses with distance `< s` ([`crate::mrc`]).
//!
//! Algorithm (Bennett and Kruskal, 1975): a Fenwick tree over access positions marks, for
//! every block seen, the position of its latest access. The distance of access `i` whose
//! block was last accessed at `p` is the number of marks after `p`: `D - prefix(p)` where `D`
//! is the number of distinct blocks so far (computed as a range sum). Then `p` is unmarked and `i` marked. Positions
//! are renumbered when the tree's window fills ([`reuse_distances`]).

use crate::dense::DenseIndex;
use crate::temporal::percent;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// A Fenwick (binary indexed) tree of counts over positions `1..=n`.
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    /// A tree over `1..=counts.len()` holding `counts` (built in O(n)).
    fn from_counts(counts: &[u32]) -> Self {
        let n = counts.len();
        let mut tree = Vec::with_capacity(n + 1);
        tree.push(0);
        tree.extend_from_slice(counts);
        for i in 1..=n {
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                tree[j] += tree[i];
            }
        }
        Self { tree }
    }

    /// Add `delta` (±1) at position `i` (1-based).
    #[inline]
    fn add(&mut self, mut i: usize, delta: i32) {
        let n = self.tree.len();
        while i < n {
            self.tree[i] = self.tree[i].wrapping_add(delta as u32);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of positions `1..=i`.
    #[inline]
    fn prefix(&self, mut i: usize) -> u64 {
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i &= i - 1;
        }
        s
    }
}

/// The dead positions among `0..cap`: a bitmap, and a Fenwick tree counting the set bits of
/// each 64-bit word. Positions are live until killed, so a new access costs nothing here;
/// killing one walks the tree up, a rank walks it down. The tree is 64 times smaller than a
/// tree over positions, so it stays in cache.
struct Marks {
    dead: Vec<u64>,
    words: Fenwick,
}

impl Marks {
    /// Positions `0..cap`, all live.
    fn new(cap: usize) -> Self {
        let words = cap.div_ceil(64);
        Self { dead: vec![0u64; words], words: Fenwick::from_counts(&vec![0; words]) }
    }

    /// Kill position `p` (live).
    #[inline]
    fn kill(&mut self, p: usize) {
        self.dead[p / 64] |= 1 << (p % 64);
        self.words.add(p / 64 + 1, 1);
    }

    /// Live positions in `0..=p`.
    #[inline]
    fn rank(&self, p: usize) -> u64 {
        let w = p / 64;
        let upto =
            if p % 64 == 63 { self.dead[w] } else { self.dead[w] & ((2u64 << (p % 64)) - 1) };
        (p as u64 + 1) - self.words.prefix(w) - upto.count_ones() as u64
    }
}

/// Smallest number of positions of the window.
const MIN_POSITIONS: usize = 1 << 16;

/// Dense keys get a direct-indexed table when their ranges total at most this many slots
/// per access ([`DenseIndex`]); the table costs 4 bytes a slot.
pub const DENSE_SLOTS_PER_KEY: u64 = 4;

/// How many accesses ahead [`reuse_distances_in`] prefetches the `last` table's slot: the
/// table is megabytes and its lookups are the pass's cache misses.
const PREFETCH_AHEAD: usize = 16;

/// Each block's latest position: [`reuse_distances_in`]'s `last` table.
trait LastPositions {
    /// Record `pos` as the latest position of `key`; its previous one, if any.
    fn replace(&mut self, key: u64, pos: u32) -> Option<u32>;
    /// Visit every recorded position.
    fn for_each_mut(&mut self, f: impl FnMut(&mut u32));
    /// Hint that `key` will be replaced soon (bring its slot into cache); a no-op by default.
    #[inline]
    fn prefetch(&self, _key: u64) {}
}

impl LastPositions for FxHashMap<u64, u32> {
    #[inline]
    fn replace(&mut self, key: u64, pos: u32) -> Option<u32> {
        self.insert(key, pos)
    }

    fn for_each_mut(&mut self, f: impl FnMut(&mut u32)) {
        self.values_mut().for_each(f);
    }
}

/// Dense keys: a slot per block ([`DenseIndex`]), `NONE` for a block not seen yet.
struct DenseLast {
    index: DenseIndex,
    pos: Vec<u32>,
}

impl DenseLast {
    /// No position recorded.
    const NONE: u32 = u32::MAX;

    fn new(index: DenseIndex) -> Self {
        let pos = vec![Self::NONE; index.slots()];
        Self { index, pos }
    }
}

impl LastPositions for DenseLast {
    #[inline]
    fn replace(&mut self, key: u64, pos: u32) -> Option<u32> {
        let old = std::mem::replace(&mut self.pos[self.index.index(key)], pos);
        (old != Self::NONE).then_some(old)
    }

    fn for_each_mut(&mut self, f: impl FnMut(&mut u32)) {
        self.pos.iter_mut().filter(|p| **p != Self::NONE).for_each(f);
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        if let Some(slot) = self.pos.get(self.index.index(key)) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch is only a hint (it never faults, even on a bad address) and
            // SSE, its instruction set, is part of every x86_64 target.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((slot as *const u32).cast::<i8>()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }
}

/// Call `f(i, distance)` for every access `i` of `keys` in order: `Some(d)` with its reuse
/// distance, or `None` for a block's first access. Returns the number of distinct blocks.
///
/// The marks cover a window of positions, not the whole trace: when the window is used up,
/// the live marks (one per distinct block) are renumbered `0..distinct` in order and the
/// structure rebuilt, with a window of at least twice the distinct blocks. It then
/// stays small and the rebuilds cost O(1) per access, amortized.
///
/// Each block's latest position is kept in an array indexed by block when the keys are
/// dense (block traces: [`DenseIndex`]), else in a hash map; the distances are the same.
pub fn reuse_distances(keys: &[u64], f: impl FnMut(usize, Option<u64>)) -> u64 {
    let mut pass = ReusePass::new(DenseIndex::of(keys, DENSE_SLOTS_PER_KEY));
    pass.push(keys, f);
    pass.distinct()
}

/// The table of latest positions of a [`ReusePass`].
enum Last {
    Dense(DenseLast),
    Hashed(FxHashMap<u64, u32>),
}

/// The reuse-distance pass of [`reuse_distances`] over keys that arrive in chunks: state per
/// distinct block (its latest position, and a window of at least twice the distinct blocks),
/// never per access, so a trace of any length streams through it.
pub struct ReusePass {
    last: Last,
    cap: usize,
    marks: Marks,
    distinct: u64,
    pos: usize,
}

impl ReusePass {
    /// An empty pass; `dense` indexes every key the pass will see (a table slot per block,
    /// [`DenseIndex`]), or `None` for a hash map.
    pub fn new(dense: Option<DenseIndex>) -> Self {
        let (last, min) = match dense {
            // A window of at least the table's size: each renumbering (which walks the
            // table) then follows at least half a table's worth of accesses.
            Some(index) => {
                let min = MIN_POSITIONS.max(index.slots());
                (Last::Dense(DenseLast::new(index)), min)
            }
            None => (Last::Hashed(FxHashMap::default()), MIN_POSITIONS),
        };
        let cap = min.max(64);
        Self { last, cap, marks: Marks::new(cap), distinct: 0, pos: 0 }
    }

    /// Distinct blocks seen so far.
    pub fn distinct(&self) -> u64 {
        self.distinct
    }

    /// Call `f(i, distance)` for every access `i` of `keys`, the next accesses of the trace.
    pub fn push(&mut self, keys: &[u64], f: impl FnMut(usize, Option<u64>)) {
        match &mut self.last {
            Last::Dense(l) => push_in(
                l,
                &mut self.marks,
                &mut self.cap,
                &mut self.distinct,
                &mut self.pos,
                keys,
                f,
            ),
            Last::Hashed(l) => push_in(
                l,
                &mut self.marks,
                &mut self.cap,
                &mut self.distinct,
                &mut self.pos,
                keys,
                f,
            ),
        }
    }
}

/// [`reuse_distances`] starting from a window of `min_positions` (at least 64), with `last`
/// (empty) as the table of latest positions.
#[cfg(test)]
fn reuse_distances_in(
    keys: &[u64],
    min_positions: usize,
    last: impl Into<Last>,
    f: impl FnMut(usize, Option<u64>),
) -> u64 {
    let cap = min_positions.max(64);
    let mut pass =
        ReusePass { last: last.into(), cap, marks: Marks::new(cap), distinct: 0, pos: 0 };
    pass.push(keys, f);
    pass.distinct()
}

#[cfg(test)]
impl From<DenseLast> for Last {
    fn from(l: DenseLast) -> Self {
        Last::Dense(l)
    }
}

#[cfg(test)]
impl From<FxHashMap<u64, u32>> for Last {
    fn from(l: FxHashMap<u64, u32>) -> Self {
        Last::Hashed(l)
    }
}

/// [`ReusePass::push`] with the table `last`.
fn push_in(
    last: &mut impl LastPositions,
    marks: &mut Marks,
    cap: &mut usize,
    distinct: &mut u64,
    pos: &mut usize,
    keys: &[u64],
    mut f: impl FnMut(usize, Option<u64>),
) {
    for (i, &k) in keys.iter().enumerate() {
        if *pos == *cap {
            *cap = (*cap).max(2 * *distinct as usize);
            renumber(last, marks);
            *pos = *distinct as usize;
            *marks = Marks::new(*cap);
        }
        if let Some(&ahead) = keys.get(i + PREFETCH_AHEAD) {
            last.prefetch(ahead);
        }
        match last.replace(k, *pos as u32) {
            Some(p) => {
                let p = p as usize;
                // Marks after p, before this access: the distinct blocks in between.
                // Live positions are below pos, one per distinct block: those after p are
                // the distinct blocks accessed since.
                let d = *distinct - marks.rank(p);
                marks.kill(p);
                f(i, Some(d));
            }
            None => {
                *distinct += 1;
                f(i, None);
            }
        }
        *pos += 1;
    }
}

/// Renumber the positions in `last` (exactly the live positions of `marks`) to `0..len`,
/// keeping their order: a live position's new number is the count of live positions before
/// it, from per-word prefix counts and one word's bits.
fn renumber(last: &mut impl LastPositions, marks: &Marks) {
    let mut before = Vec::with_capacity(marks.dead.len());
    let mut live = 0u32;
    for &w in &marks.dead {
        before.push(live);
        live += 64 - w.count_ones();
    }
    last.for_each_mut(|p| {
        let (w, b) = (*p as usize / 64, *p % 64);
        *p = before[w] + (!marks.dead[w] & ((1u64 << b) - 1)).count_ones();
    });
}

/// Distances below this are counted in place by [`ReuseHistogram::of`].
const SHORT: usize = 1 << 15;

/// Sort `v` (LSD radix sort, 11 bits a pass, only as many passes as the largest value needs).
fn radix_sort(v: &mut Vec<u64>) {
    const BITS: u32 = 11;
    let Some(&max) = v.iter().max() else { return };
    let bits = 64 - max.leading_zeros();
    let mut buf = vec![0u64; v.len()];
    let mut shift = 0;
    while shift < bits {
        let mut pos = [0usize; 1 << BITS];
        for &x in v.iter() {
            pos[((x >> shift) & ((1 << BITS) - 1)) as usize] += 1;
        }
        let mut acc = 0;
        for p in pos.iter_mut() {
            let c = *p;
            *p = acc;
            acc += c;
        }
        for &x in v.iter() {
            let b = ((x >> shift) & ((1 << BITS) - 1)) as usize;
            buf[pos[b]] = x;
            pos[b] += 1;
        }
        std::mem::swap(v, &mut buf);
        shift += BITS;
    }
}

/// Long distances [`HistogramBuilder`] holds before sorting them into the histogram.
const LONG_BATCH: usize = 1 << 20;

/// A [`ReuseHistogram`] built access by access, in memory bounded by the largest distance
/// (below the distinct blocks), not the accesses.
///
/// Short distances are counted in place (the two small arrays stay in cache); long ones,
/// whose counters would be scattered over megabytes, are appended as `distance << 1 |
/// is_read` and radix-sorted in batches of [`LONG_BATCH`], so the histogram is built in
/// order.
pub struct HistogramBuilder {
    all: Vec<u64>,
    reads: Vec<u64>,
    cold: u64,
    long: Vec<u64>,
    /// Long distances held before a sort ([`LONG_BATCH`]; smaller in tests).
    batch: usize,
}

impl Default for HistogramBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl HistogramBuilder {
    /// No access yet.
    pub fn new() -> Self {
        Self {
            all: vec![0; SHORT],
            reads: vec![0; SHORT],
            cold: 0,
            long: Vec::new(),
            batch: LONG_BATCH,
        }
    }

    /// Count one access: its distance (`None` for a first access) and whether it is a read.
    #[inline]
    pub fn push(&mut self, d: Option<u64>, read: bool) {
        match d {
            None => self.cold += 1,
            Some(d) if (d as usize) < SHORT => {
                self.all[d as usize] += 1;
                self.reads[d as usize] += read as u64;
            }
            Some(d) => {
                self.long.push(d << 1 | read as u64);
                if self.long.len() >= self.batch {
                    self.fold_long();
                }
            }
        }
    }

    /// Sort the long distances held into the histogram.
    fn fold_long(&mut self) {
        radix_sort(&mut self.long);
        if let Some(&last) = self.long.last() {
            let len = (last >> 1) as usize + 1;
            if self.all.len() < len {
                self.all.resize(len, 0);
                self.reads.resize(len, 0);
            }
        }
        for &x in &self.long {
            let d = (x >> 1) as usize;
            self.all[d] += 1;
            self.reads[d] += x & 1;
        }
        self.long.clear();
    }

    /// The histogram, with `block_size`-byte blocks for Figure 3's groups.
    pub fn finish(mut self, block_size: u64) -> ReuseHistogram {
        self.fold_long();
        drop(self.long);
        let mut h = ReuseHistogram { all: self.all, cold: self.cold, ..Default::default() };
        let mut reads_hist = self.reads;
        let used = h.all.iter().rposition(|&n| n > 0).map_or(0, |d| d + 1);
        h.all.truncate(used);
        reads_hist.truncate(used);
        let reaccesses: u64 = reads_hist.iter().sum();
        let mut seen = 0u64;
        let mut median_set = false;
        for (d, &n) in reads_hist.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let bytes = (d as u64).saturating_mul(block_size);
            let b = REUSE_BUCKETS.iter().position(|&(_, hi)| bytes < hi).unwrap_or(3);
            h.reaccess_buckets[b] += n;
            seen += n;
            if !median_set && 2 * seen >= reaccesses {
                h.reaccess_median_blocks = d as u64;
                median_set = true;
            }
        }
        for b in 0..4 {
            h.reaccess_bucket_percent[b] = percent(h.reaccess_buckets[b], reaccesses);
        }
        h
    }
}

/// Upper bounds (exclusive, in bytes) of the reuse-distance groups of Bonfire Figure 3:
/// under 10 MB, 10 MB to 100 MB, 100 MB to 1 GB, 1 GB and over. The paper's text names
/// 10 MB as the bound of "small" reuse distances; the other bounds are ember's decades.
pub const REUSE_BUCKETS: [(&str, u64); 4] = [
    ("<10MB", 10_000_000),
    ("10MB-100MB", 100_000_000),
    ("100MB-1GB", 1_000_000_000),
    (">=1GB", u64::MAX),
];

/// Reuse distances of a trace or volume: the full distribution and Figure 3's groups.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReuseHistogram {
    /// `all[d]`: accesses (reads and writes) with reuse distance `d` blocks; the LRU stack
    /// distance distribution of [`crate::mrc`].
    pub all: Vec<u64>,
    /// First accesses (infinite distance).
    pub cold: u64,
    /// Reaccesses (reads of a block accessed before) in each [`REUSE_BUCKETS`] group.
    pub reaccess_buckets: [u64; 4],
    /// Figure 3: `100 * reaccess_buckets / reaccesses`.
    pub reaccess_bucket_percent: [f64; 4],
    /// Median reuse distance of reaccesses, in blocks (0 when there is none).
    pub reaccess_median_blocks: u64,
}

impl ReuseHistogram {
    /// The histogram of `keys`/`writes` with `block_size`-byte blocks.
    pub fn of(keys: &[u64], writes: &[bool], block_size: u64) -> Self {
        let mut b = HistogramBuilder::new();
        reuse_distances(keys, |i, d| b.push(d, !writes[i]));
        b.finish(block_size)
    }

    /// Accesses with a finite reuse distance.
    pub fn reuses(&self) -> u64 {
        self.all.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distances(keys: &[u64]) -> Vec<Option<u64>> {
        let mut out = Vec::new();
        reuse_distances(keys, |_, d| out.push(d));
        out
    }

    /// Quadratic reference: distinct keys strictly between the two accesses.
    fn naive(keys: &[u64]) -> Vec<Option<u64>> {
        (0..keys.len())
            .map(|i| {
                let p = (0..i).rev().find(|&j| keys[j] == keys[i])?;
                let mut s: Vec<u64> = keys[p + 1..i].to_vec();
                s.sort_unstable();
                s.dedup();
                Some(s.len() as u64)
            })
            .collect()
    }

    #[test]
    fn bonfire_figure3_reuse_distance_of_a_b_c_a_is_2() {
        assert_eq!(distances(&[1, 2, 3, 1]), vec![None, None, None, Some(2)]);
        assert_eq!(distances(&[1, 1]), vec![None, Some(0)]);
        assert_eq!(distances(&[1, 2, 2, 2, 1]), vec![None, None, Some(0), Some(0), Some(1)]);
    }

    #[test]
    fn matches_the_quadratic_definition_on_a_pseudo_random_trace() {
        let mut x = 12345u64;
        let keys: Vec<u64> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % 200
            })
            .collect();
        assert_eq!(distances(&keys), naive(&keys));
        // A 64-position window: renumbered and grown many times on the way.
        let mut small = Vec::new();
        let n = reuse_distances_in(&keys, 64, FxHashMap::default(), |_, d| small.push(d));
        assert_eq!(small, naive(&keys));
        assert_eq!(n, 200);
    }

    #[test]
    fn dense_and_hashed_tables_give_identical_distances() {
        // Three volumes, blocks in ranges at odd offsets, Zipf-like skew from squaring.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let keys: Vec<u64> = (0..60_000)
            .map(|_| {
                let r = next() % 3000;
                ember_trace::block_key((next() % 3) as u32 * 5, 1_000_000 + r * r / 300)
            })
            .collect();
        let index = DenseIndex::of(&keys, DENSE_SLOTS_PER_KEY).expect("dense keys");
        let run = |min: usize, dense: bool| {
            let mut out = Vec::with_capacity(keys.len());
            let n = if dense {
                reuse_distances_in(&keys, min, DenseLast::new(index.clone()), |_, d| out.push(d))
            } else {
                reuse_distances_in(&keys, min, FxHashMap::default(), |_, d| out.push(d))
            };
            (n, out)
        };
        let hashed = run(MIN_POSITIONS, false);
        assert!(hashed.0 > 5_000, "distinct blocks {}", hashed.0);
        assert!(hashed.1.iter().any(|d| d.is_some_and(|d| d > 1000)));
        // Small windows renumber the dense table many times on the way.
        for min in [64, 1000, MIN_POSITIONS] {
            assert_eq!(run(min, true), hashed, "window {min}");
        }
        let mut public = Vec::new();
        assert_eq!(reuse_distances(&keys, |_, d| public.push(d)), hashed.0);
        assert_eq!(public, hashed.1);
        // Spread keys take the hash map and still match the quadratic definition.
        let sparse: Vec<u64> =
            keys[..2000].iter().map(|&k| k.wrapping_mul(0x1_0000_0001)).collect();
        assert_eq!(DenseIndex::of(&sparse, DENSE_SLOTS_PER_KEY), None);
        assert_eq!(distances(&sparse), naive(&sparse));
    }

    #[test]
    fn marks_rank_matches_a_plain_bitmap() {
        let cap = 3 * (1 << 18) + 777;
        let mut m = Marks::new(cap);
        let mut dead = vec![false; cap];
        let mut x = 7u64;
        let mut rnd = move |n: usize| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) as usize) % n
        };
        for _ in 0..5 {
            for _ in 0..5000 {
                let p = rnd(cap);
                if !dead[p] {
                    m.kill(p);
                    dead[p] = true;
                }
            }
            let mut live = 0u64;
            let mut ranks = Vec::with_capacity(cap);
            for d in &dead {
                live += !d as u64;
                ranks.push(live);
            }
            for _ in 0..500 {
                let p = rnd(cap);
                assert_eq!(m.rank(p), ranks[p], "position {p}");
            }
            assert_eq!(m.rank(cap - 1), live);
        }
    }

    #[test]
    fn radix_sort_sorts() {
        let mut x = 99u64;
        let mut v: Vec<u64> = (0..10_000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                x >> (x % 50)
            })
            .collect();
        let mut w = v.clone();
        w.sort_unstable();
        radix_sort(&mut v);
        assert_eq!(v, w);
    }

    #[test]
    fn long_distances_go_through_the_sorted_path() {
        // 40,000 distinct blocks, then again in the same order: every second access has
        // distance 39,999 (>= SHORT); a write among them is counted in `all` only.
        let keys: Vec<u64> = (0..40_000u64).chain(0..40_000).collect();
        let mut writes = vec![false; 80_000];
        writes[40_000] = true;
        let h = ReuseHistogram::of(&keys, &writes, 4096);
        assert_eq!(h.cold, 40_000);
        assert_eq!(h.all.len(), 40_000);
        assert_eq!(h.all[39_999], 40_000);
        assert_eq!(h.reaccess_median_blocks, 39_999);
        // 39,999 blocks of 4 KiB = 164 MB: the 100MB-1GB group.
        assert_eq!(h.reaccess_buckets, [0, 0, 39_999, 0]);
    }

    #[test]
    fn figure3_buckets_count_reads_only() {
        // a b c a(R, d=2) b(W, d=2) with 4 MB blocks: distance 2 = 8 MB < 10 MB.
        let h =
            ReuseHistogram::of(&[1, 2, 3, 1, 2], &[false, false, false, false, true], 4_000_000);
        assert_eq!(h.cold, 3);
        assert_eq!(h.all, vec![0, 0, 2]);
        assert_eq!(h.reaccess_buckets, [1, 0, 0, 0]);
        assert_eq!(h.reaccess_bucket_percent, [100.0, 0.0, 0.0, 0.0]);
        assert_eq!(h.reaccess_median_blocks, 2);
        // With 40 MB blocks the same read lands in 10 MB-100 MB.
        let h = ReuseHistogram::of(&[1, 2, 3, 1], &[false; 4], 40_000_000);
        assert_eq!(h.reaccess_buckets, [0, 1, 0, 0]);
    }

    #[test]
    fn chunked_pass_and_batched_long_distances_equal_the_whole_pass() {
        // Zipf-like keys over 100,000 blocks: many distances above SHORT.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let keys: Vec<u64> = (0..400_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = x % 100_000;
                r * r / 100_000 + (x >> 40) % 3
            })
            .collect();
        let writes: Vec<bool> = keys.iter().map(|k| k.is_multiple_of(5)).collect();
        let whole = ReuseHistogram::of(&keys, &writes, 4096);
        assert!(whole.all.len() > SHORT, "longest distance {}", whole.all.len());
        for dense in [true, false] {
            let index = dense.then(|| DenseIndex::of(&keys, DENSE_SLOTS_PER_KEY).expect("dense"));
            let mut pass = ReusePass::new(index);
            let mut b = HistogramBuilder { batch: 1000, ..HistogramBuilder::new() };
            let mut at = 0;
            for len in [1, 7, 64, 5000, 100_000].iter().cycle() {
                let end = (at + len).min(keys.len());
                pass.push(&keys[at..end], |i, d| b.push(d, !writes[at + i]));
                at = end;
                if at == keys.len() {
                    break;
                }
            }
            assert_eq!(pass.distinct(), whole.cold);
            assert_eq!(b.finish(4096), whole, "dense {dense}");
        }
    }
}
