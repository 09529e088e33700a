//! The marks of the reuse-distance pass (Bennett and Kruskal, 1975): which positions of the
//! window are dead, with their counts per 64-bit word in a Fenwick tree, so a rank is a walk
//! down a tree 64 times smaller than the window. Imports nothing.

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
pub(super) struct Marks {
    /// One bit a position: set once the position is dead.
    pub(super) dead: Vec<u64>,
    words: Fenwick,
}

impl Marks {
    /// Positions `0..cap`, all live.
    pub(super) fn new(cap: usize) -> Self {
        let words = cap.div_ceil(64);
        Self { dead: vec![0u64; words], words: Fenwick::from_counts(&vec![0; words]) }
    }

    /// Kill position `p` (live).
    #[inline]
    pub(super) fn kill(&mut self, p: usize) {
        self.dead[p / 64] |= 1 << (p % 64);
        self.words.add(p / 64 + 1, 1);
    }

    /// Live positions in `0..=p`.
    #[inline]
    pub(super) fn rank(&self, p: usize) -> u64 {
        let w = p / 64;
        let upto =
            if p % 64 == 63 { self.dead[w] } else { self.dead[w] & ((2u64 << (p % 64)) - 1) };
        (p as u64 + 1) - self.words.prefix(w) - upto.count_ones() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
