//! A seeded permutation of `[0, n)` in constant memory, used to scatter Zipf ranks over the
//! address space so that popular blocks are not adjacent.
//!
//! It is a balanced four-round Feistel network over the smallest even-bit-width domain
//! `[0, 2^(2h))` holding `n`, with cycle walking to stay below `n` (Black and Rogaway,
//! *Ciphers with arbitrary finite domains*, CT-RSA 2002). The domain is below `4n`, so a
//! lookup takes fewer than four network evaluations on average. A table of `n` entries would
//! cost 80 MB at 10M blocks; this costs 48 bytes.

/// A bijection of `[0, n)` chosen by a seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scramble {
    n: u64,
    half_bits: u32,
    mask: u64,
    keys: [u64; 4],
}

/// SplitMix64's finalizer: a strong 64-bit mixing function.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Scramble {
    /// The permutation of `[0, n)` for `seed`. `n = 0` gives an empty permutation.
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mask = if half_bits >= 64 { u64::MAX } else { (1u64 << half_bits) - 1 };
        let mut state = seed;
        let mut keys = [0u64; 4];
        for k in &mut keys {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            *k = mix(state);
        }
        Self { n, half_bits, mask, keys }
    }

    /// The size of the permuted set.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True if the permuted set is empty.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    #[inline]
    fn network(&self, x: u64) -> u64 {
        let mut l = (x >> self.half_bits) & self.mask;
        let mut r = x & self.mask;
        for &k in &self.keys {
            let f = mix(r ^ k) & self.mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The image of `x`, which must be below [`Scramble::len`] (larger values are reduced
    /// modulo the length first).
    #[inline]
    pub fn apply(&self, x: u64) -> u64 {
        if self.n <= 1 {
            return 0;
        }
        let mut y = self.network(x % self.n);
        while y >= self.n {
            y = self.network(y);
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_bijection(n: u64, seed: u64) {
        let s = Scramble::new(n, seed);
        let mut seen = vec![false; n as usize];
        for x in 0..n {
            let y = s.apply(x);
            assert!(y < n, "n={n}: {x} -> {y}");
            assert!(!seen[y as usize], "n={n}: {y} hit twice");
            seen[y as usize] = true;
        }
    }

    #[test]
    fn is_a_bijection_for_awkward_sizes() {
        for n in [1, 2, 3, 4, 5, 7, 16, 17, 1000, 65_537, 100_003] {
            assert_bijection(n, 42);
        }
    }

    #[test]
    fn scatters_neighbours_and_depends_on_seed() {
        let n = 1_000_000;
        let a = Scramble::new(n, 1);
        let b = Scramble::new(n, 2);
        let first: Vec<u64> = (0..100).map(|x| a.apply(x)).collect();
        let other: Vec<u64> = (0..100).map(|x| b.apply(x)).collect();
        assert_ne!(first, other);
        // The 100 most popular ranks must not land in one small region: count how many
        // consecutive ranks land within 16 blocks of each other. For a random map of 1M
        // blocks that happens with probability ~3e-5 per pair.
        let close = first.windows(2).filter(|w| w[0].abs_diff(w[1]) <= 16).count();
        assert!(close <= 1, "{close} adjacent pairs");
        let spread = first.iter().max().unwrap_or(&0) - first.iter().min().unwrap_or(&0);
        assert!(spread > n / 2, "ranks 0..100 span only {spread} blocks");
    }

    #[test]
    fn same_seed_same_permutation() {
        let a = Scramble::new(12_345, 9);
        let b = Scramble::new(12_345, 9);
        assert!((0..12_345).all(|x| a.apply(x) == b.apply(x)));
    }
}
