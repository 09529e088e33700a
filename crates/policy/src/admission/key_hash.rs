//! A fast hash for block keys (already well-spread 64-bit integers), used by the sieves'
//! tables: a Fibonacci multiply, as in FxHash. `std`'s SipHash would dominate the per-miss
//! cost of SieveStore-C.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier of Fibonacci hashing (2^64 / golden ratio, odd).
pub const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hasher for `u64` keys: one multiply (and a fold for other inputs).
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(FIB);
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(FIB);
    }
}

/// A `HashMap` keyed by block keys with [`KeyHasher`].
pub type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// An empty [`KeyMap`].
pub fn key_map<V>() -> KeyMap<V> {
    KeyMap::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_hash_apart() {
        let h = |k: u64| {
            let mut s = KeyHasher::default();
            s.write_u64(k);
            s.finish()
        };
        assert_ne!(h(1), h(2));
        assert_eq!(h(7), h(7));
        let mut m = key_map::<u32>();
        m.insert(5, 1);
        assert_eq!(m.get(&5), Some(&1));
    }
}
