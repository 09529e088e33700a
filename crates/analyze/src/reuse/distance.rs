//! The reuse-distance pass: each block's latest position (a dense table or a hash map) and
//! the [`Marks`] of the window, renumbered when the window fills. Imports the marks and the
//! dense index.

use super::marks::Marks;
use crate::dense::DenseIndex;
use rustc_hash::FxHashMap;

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
}
