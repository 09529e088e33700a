//! OCF's `nhit` promotion policy, the modern production baseline (Open CAS Framework,
//! `ocf_promotion_nhit`): a missed block is promoted into the cache only after it has been
//! requested `insertion_threshold` times, counted in a bounded hash of recently missed
//! blocks; while the cache's occupancy is below `trigger_threshold`, every miss is promoted.
//! OCF's defaults: insertion threshold 3, trigger threshold 80 % occupancy.
//!
//! Unlike SieveStore-C there is no time window: a count lives until its entry is recycled by
//! newer blocks (the hash is a ring of `hash_entries` slots, oldest replaced first).

use super::config_error::SieveConfigError;
use super::key_hash::{key_map, KeyMap};
use super::Admission;
use crate::Access;
use std::collections::VecDeque;

/// Parameters of [`OcfNhit`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OcfNhitConfig {
    /// Misses to a block before it is promoted (OCF: 2..=1000, default 3).
    pub insertion_threshold: u32,
    /// Occupancy fraction below which every miss is promoted (OCF default 0.8).
    pub trigger_threshold: f64,
    /// Blocks whose counts are remembered at once.
    pub hash_entries: usize,
}

impl Default for OcfNhitConfig {
    fn default() -> Self {
        Self { insertion_threshold: 3, trigger_threshold: 0.8, hash_entries: 1 << 16 }
    }
}

/// The nhit promotion sieve.
#[derive(Clone, Debug)]
pub struct OcfNhit {
    cfg: OcfNhitConfig,
    counts: KeyMap<u32>,
    ring: VecDeque<u64>,
    resident: usize,
    capacity: usize,
}

impl OcfNhit {
    /// A sieve with `cfg`; rejects a threshold of 0, a trigger outside 0..=1 or an empty
    /// hash.
    pub fn new(cfg: OcfNhitConfig) -> Result<Self, SieveConfigError> {
        const NAME: &str = "ocf-nhit";
        if cfg.insertion_threshold == 0 {
            return Err(SieveConfigError::out_of_range(NAME, "insertion_threshold", 0, ">= 1"));
        }
        if !(0.0..=1.0).contains(&cfg.trigger_threshold) {
            return Err(SieveConfigError::out_of_range(
                NAME,
                "trigger_threshold",
                cfg.trigger_threshold,
                "0..=1",
            ));
        }
        if cfg.hash_entries == 0 {
            return Err(SieveConfigError::out_of_range(NAME, "hash_entries", 0, ">= 1"));
        }
        Ok(Self {
            cfg,
            counts: key_map(),
            ring: VecDeque::with_capacity(cfg.hash_entries),
            resident: 0,
            capacity: 0,
        })
    }

    fn below_trigger(&self) -> bool {
        (self.resident as f64) < self.cfg.trigger_threshold * self.capacity as f64
    }
}

impl Admission for OcfNhit {
    fn name(&self) -> &'static str {
        "ocf-nhit"
    }

    #[inline]
    fn observe(&mut self, _access: &Access, _hit: bool) {}

    fn admit(&mut self, access: &Access) -> bool {
        if self.below_trigger() {
            return true;
        }
        let key = access.key;
        let n = match self.counts.get_mut(&key) {
            Some(c) => {
                *c += 1;
                *c
            }
            None => {
                if self.ring.len() == self.cfg.hash_entries {
                    if let Some(old) = self.ring.pop_front() {
                        self.counts.remove(&old);
                    }
                }
                self.ring.push_back(key);
                self.counts.insert(key, 1);
                1
            }
        };
        if n >= self.cfg.insertion_threshold {
            // Promoted: forget the count (its ring slot is recycled lazily).
            self.counts.remove(&key);
            true
        } else {
            false
        }
    }

    fn memory_bytes(&self) -> usize {
        self.counts.capacity() * (8 + 4 + 1) + self.ring.capacity() * 8
    }

    fn set_occupancy(&mut self, resident: usize, capacity: usize) {
        self.resident = resident;
        self.capacity = capacity;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_everything_below_the_trigger_then_the_nth_miss() {
        let mut s = OcfNhit::new(OcfNhitConfig::default()).unwrap();
        s.set_occupancy(79, 100);
        assert!(s.admit(&Access::read(1, 0)), "below 80 % occupancy every miss is admitted");
        s.set_occupancy(80, 100);
        assert!(!s.admit(&Access::read(2, 1)));
        assert!(!s.admit(&Access::read(2, 2)));
        assert!(s.admit(&Access::read(2, 3)), "third miss promotes");
        assert!(!s.admit(&Access::read(2, 4)), "count restarts after promotion");
    }

    #[test]
    fn the_hash_forgets_the_oldest_block() {
        let cfg = OcfNhitConfig { hash_entries: 2, ..OcfNhitConfig::default() };
        let mut s = OcfNhit::new(cfg).unwrap();
        s.set_occupancy(100, 100);
        assert!(!s.admit(&Access::read(1, 0)));
        assert!(!s.admit(&Access::read(1, 1)));
        assert!(!s.admit(&Access::read(2, 2)));
        assert!(!s.admit(&Access::read(3, 3))); // recycles block 1's slot
        assert!(!s.admit(&Access::read(1, 4)), "block 1's two misses were forgotten");
        assert!(OcfNhit::new(OcfNhitConfig { insertion_threshold: 0, ..cfg }).is_err());
    }
}
