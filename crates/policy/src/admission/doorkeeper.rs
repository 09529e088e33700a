//! The doorkeeper: admit a missed block on its second miss. TinyLFU (Einziger, Friedman and
//! Manes, ACM TOS 2017, section 3.4.2) puts a Bloom filter in front of its frequency sketch
//! so that blocks seen once never enter it; used alone as an admission filter, it keeps
//! one-hit wonders out of the cache. libCacheSim's `BloomFilterAdmissioner` is this filter
//! with an exact set of every missed block, never cleared.
//!
//! A missed block is admitted if the filter has seen it miss before; otherwise it is recorded
//! and refused. Hits change nothing. Two parameters:
//!
//! - `keys`: after this many blocks have been recorded, the filter is cleared (the aging of
//!   TinyLFU's doorkeeper, which is reset with its sketch); 0 never clears it.
//! - `fpr`: the Bloom filter's false-positive rate at `keys` recorded blocks, which sizes it
//!   (about 9.6 bits a block at 1 %); a false positive admits a block on its first miss.
//!   0 keeps an exact set instead (8 bytes and the set's overhead per recorded block):
//!   libCacheSim's behaviour with `keys` = 0.
//!
//! Defaults: 2^20 blocks at 1 % (1.2 MiB).

use super::config_error::SieveConfigError;
use super::key_hash::KeyHasher;
use super::Admission;
use crate::Access;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;

/// Blocks recorded before the filter is cleared, by default.
pub const DEFAULT_KEYS: u64 = 1 << 20;

/// The Bloom filter's false-positive rate at [`DEFAULT_KEYS`], by default.
pub const DEFAULT_FPR: f64 = 0.01;

/// Where the doorkeeper records the blocks it has seen miss.
#[derive(Clone, Debug)]
enum Seen {
    /// A Bloom filter of `bits.len() * 64` bits probed `hashes` times a block.
    Bloom { bits: Vec<u64>, hashes: u32 },
    /// Every recorded block.
    Exact(HashSet<u64, BuildHasherDefault<KeyHasher>>),
}

/// Admit a block on its second miss (see the module documentation).
#[derive(Clone, Debug)]
pub struct Doorkeeper {
    seen: Seen,
    /// Clear after this many recordings (0: never).
    keys: u64,
    /// Blocks recorded since the last clearing.
    recorded: u64,
}

/// A 64-bit finalizer (splitmix64's): block keys are dense, the filter's probes must not be.
#[inline]
fn mix(key: u64) -> u64 {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Doorkeeper {
    /// A doorkeeper cleared after `keys` recorded blocks (0: never) whose Bloom filter has
    /// false-positive rate `fpr` at that many (0: an exact set). `fpr` must be below 0.5;
    /// a Bloom filter needs `keys` above 0.
    pub fn new(keys: u64, fpr: f64) -> Result<Self, SieveConfigError> {
        if !(0.0..0.5).contains(&fpr) {
            return Err(SieveConfigError::out_of_range("bloom", "fpr", fpr, "0 <= fpr < 0.5"));
        }
        let seen = if fpr == 0.0 {
            Seen::Exact(HashSet::default())
        } else {
            if keys == 0 {
                return Err(SieveConfigError::out_of_range(
                    "bloom",
                    "keys",
                    keys,
                    "at least 1 for a Bloom filter (fpr above 0); fpr 0 keeps an exact set",
                ));
            }
            // The optimal filter: m = -n ln p / (ln 2)^2 bits and k = (m / n) ln 2 probes.
            let ln2 = std::f64::consts::LN_2;
            let m = (-(keys as f64) * fpr.ln() / (ln2 * ln2)).ceil().max(64.0);
            let words = (m / 64.0).ceil() as usize;
            let hashes = ((words as f64 * 64.0 / keys as f64) * ln2).round().clamp(1.0, 16.0);
            Seen::Bloom { bits: vec![0; words], hashes: hashes as u32 }
        };
        Ok(Self { seen, keys, recorded: 0 })
    }

    /// The probes of `key`: Kirsch and Mitzenmacher's double hashing, bit `h1 + i * h2`.
    #[inline]
    fn probes(key: u64, hashes: u32, bits: usize) -> impl Iterator<Item = usize> {
        let h = mix(key);
        let (h1, h2) = (h & 0xFFFF_FFFF, (h >> 32) | 1);
        let n = bits as u64;
        (0..u64::from(hashes)).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % n) as usize)
    }

    /// True if `key` was recorded (or, in a Bloom filter, looks so); records it if not.
    fn check_and_record(&mut self, key: u64) -> bool {
        let was = match &mut self.seen {
            Seen::Exact(set) => !set.insert(key),
            Seen::Bloom { bits, hashes } => {
                let n = bits.len() * 64;
                let mut all = true;
                for b in Self::probes(key, *hashes, n) {
                    let (w, m) = (b / 64, 1u64 << (b % 64));
                    all &= bits[w] & m != 0;
                    bits[w] |= m;
                }
                all
            }
        };
        if !was {
            self.recorded += 1;
            if self.keys > 0 && self.recorded >= self.keys {
                self.clear();
            }
        }
        was
    }

    /// Forget every recorded block.
    fn clear(&mut self) {
        match &mut self.seen {
            Seen::Exact(set) => set.clear(),
            Seen::Bloom { bits, .. } => bits.fill(0),
        }
        self.recorded = 0;
    }
}

impl Admission for Doorkeeper {
    fn name(&self) -> &'static str {
        "bloom"
    }

    #[inline]
    fn observe(&mut self, _access: &Access, _hit: bool) {}

    #[inline]
    fn admit(&mut self, access: &Access) -> bool {
        self.check_and_record(access.key)
    }

    fn memory_bytes(&self) -> usize {
        match &self.seen {
            Seen::Bloom { bits, .. } => bits.len() * 8,
            // A hashbrown set: the key and a control byte a bucket.
            Seen::Exact(set) => set.capacity() * 9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(d: &mut Doorkeeper, keys: &[u64]) -> Vec<bool> {
        keys.iter().map(|&k| d.admit(&Access::read(k, 0))).collect()
    }

    #[test]
    fn admits_on_the_second_miss_exactly() {
        let mut d = Doorkeeper::new(0, 0.0).unwrap();
        assert_eq!(admits(&mut d, &[1, 2, 1, 1, 3, 2]), [false, false, true, true, false, true]);
        assert!(d.memory_bytes() > 0);
    }

    #[test]
    fn clears_after_keys_recorded_blocks() {
        let mut d = Doorkeeper::new(3, 0.0).unwrap();
        // 1, 2, 3 recorded: the third clears the filter, so 1 is new again.
        assert_eq!(admits(&mut d, &[1, 2, 3, 1, 1]), [false, false, false, false, true]);
    }

    #[test]
    fn the_bloom_filter_has_no_false_negatives_and_few_false_positives() {
        let n = 100_000u64;
        let mut d = Doorkeeper::new(n, 0.01).unwrap();
        assert!(d.memory_bytes() < (n as usize * 10) / 8 + 64, "{}", d.memory_bytes());
        let first: Vec<bool> = (0..n).map(|k| d.admit(&Access::read(k * 7919, 0))).collect();
        // Before the filter fills, a first miss is refused unless it collides.
        let fp = first.iter().filter(|&&a| a).count() as f64 / n as f64;
        assert!(fp < 0.01, "false positives on first misses: {fp}");
        let mut d = Doorkeeper::new(n, 0.01).unwrap();
        for k in 0..n / 2 {
            d.admit(&Access::read(k, 0));
        }
        assert!((0..n / 2).all(|k| d.admit(&Access::read(k, 0))), "a recorded key refused");
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(Doorkeeper::new(10, 0.5).is_err());
        assert!(Doorkeeper::new(10, -0.1).is_err());
        assert!(Doorkeeper::new(0, 0.01).is_err());
        assert!(Doorkeeper::new(0, 0.0).is_ok());
    }
}
