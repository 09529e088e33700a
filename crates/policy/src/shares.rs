//! Shares of the cache per volume, as Open CAS's IO classes and CacheLib's pools bound them:
//! a *maximum* (a volume at its max takes no room from the others: an allocation of its
//! evicts one of its own blocks, even with room left) and a *minimum* (a volume at or under
//! its min is no victim of another volume's allocation). [`Shares`] keeps each volume's
//! limits and occupancy and answers the two questions an allocation asks; the replacement
//! policy keeps its own order and is asked for its first victim the answer allows
//! ([`crate::Replacement::evict_where`]), through `crate::replacement::WithShares`.
//!
//! Rules for a caller:
//! - with no share set it MUST NOT wrap the policy: every policy then runs exactly as alone
//!   (libCacheSim's counts), with no cost on any path;
//! - it MUST tell [`Shares`] of every block that becomes resident or leaves (the wrapper
//!   does, for what passes through it);
//! - the sum of the minimums MUST stay below the capacity, so an allocation always finds a
//!   victim ([`Shares::set`] refuses otherwise).

use ember_trace::key_volume;

/// One volume's bounds, in blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareLimits {
    /// At or under this many blocks, no other volume's allocation evicts its blocks.
    pub min_blocks: u64,
    /// At this many blocks, its allocations evict its own blocks (at least 1).
    pub max_blocks: u64,
}

/// Why a share cannot be set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// min above max, or max 0.
    #[error("min share {min} blocks above max share {max} blocks (max at least 1)")]
    MinAboveMax {
        /// The min, in blocks.
        min: u64,
        /// The max, in blocks.
        max: u64,
    },
    /// The minimums would reserve the whole cache.
    #[error(
        "the min shares add up to {total} of the cache's {capacity} blocks: keep them under it"
    )]
    MinsFillTheCache {
        /// Their sum, in blocks.
        total: u64,
        /// The cache's capacity.
        capacity: u64,
    },
}

/// Every volume's limits and occupancy.
#[derive(Clone, Debug)]
pub struct Shares {
    capacity: u64,
    /// By volume number: its limits, if it has any.
    limits: Vec<Option<ShareLimits>>,
    /// By volume number: its resident blocks.
    occupancy: Vec<u64>,
}

impl Shares {
    /// No limits yet, over a cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Shares {
        Shares { capacity: capacity as u64, limits: Vec::new(), occupancy: Vec::new() }
    }

    /// Set `volume`'s limits (`None`: none), clamped to the capacity. Refused, with nothing
    /// changed, when min exceeds max or the minimums would fill the cache.
    pub fn set(&mut self, volume: u32, limits: Option<ShareLimits>) -> Result<(), ShareError> {
        let limits = limits.map(|l| ShareLimits {
            min_blocks: l.min_blocks.min(self.capacity),
            max_blocks: l.max_blocks.min(self.capacity),
        });
        if let Some(l) = limits {
            if l.max_blocks == 0 || l.min_blocks > l.max_blocks {
                return Err(ShareError::MinAboveMax { min: l.min_blocks, max: l.max_blocks });
            }
        }
        let i = volume as usize;
        let others: u64 = self
            .limits
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter_map(|(_, l)| l.map(|l| l.min_blocks))
            .sum();
        let total = others + limits.map_or(0, |l| l.min_blocks);
        if total > 0 && total >= self.capacity {
            return Err(ShareError::MinsFillTheCache { total, capacity: self.capacity });
        }
        if self.limits.len() <= i {
            self.limits.resize(i + 1, None);
        }
        self.limits[i] = limits;
        Ok(())
    }

    /// Take every volume's limits from `from` (checked there, for a cache of the same
    /// capacity); the occupancy stays.
    pub fn copy_limits(&mut self, from: &Shares) {
        self.limits.clone_from(&from.limits);
    }

    /// `volume`'s limits, if it has any.
    pub fn limits(&self, volume: u32) -> Option<ShareLimits> {
        self.limits.get(volume as usize).copied().flatten()
    }

    /// True if some volume has limits.
    pub fn is_active(&self) -> bool {
        self.limits.iter().any(Option::is_some)
    }

    /// `volume`'s resident blocks.
    pub fn occupancy(&self, volume: u32) -> u64 {
        self.occupancy.get(volume as usize).copied().unwrap_or(0)
    }

    fn max(&self, volume: u32) -> u64 {
        self.limits(volume).map_or(u64::MAX, |l| l.max_blocks)
    }

    fn min(&self, volume: u32) -> u64 {
        self.limits(volume).map_or(0, |l| l.min_blocks)
    }

    /// Before a block of `volume` becomes resident in a cache holding `resident` blocks:
    /// must a block leave first? (The cache is full, or the volume is at its max.)
    pub fn must_evict(&self, volume: u32, resident: usize) -> bool {
        resident as u64 >= self.capacity || self.occupancy(volume) >= self.max(volume)
    }

    /// May the resident `victim` leave for an allocation of `volume`? A volume at its max
    /// evicts only its own blocks; otherwise a block of a volume at or under its min stays.
    pub fn may_evict(&self, volume: u32, victim: u64) -> bool {
        let of = key_volume(victim);
        if self.occupancy(volume) >= self.max(volume) {
            return of == volume;
        }
        of == volume || self.occupancy(of) > self.min(of)
    }

    /// `key` became resident.
    pub fn inserted(&mut self, key: u64) {
        let i = key_volume(key) as usize;
        if self.occupancy.len() <= i {
            self.occupancy.resize(i + 1, 0);
        }
        self.occupancy[i] += 1;
    }

    /// `key` left.
    pub fn removed(&mut self, key: u64) {
        if let Some(o) = self.occupancy.get_mut(key_volume(key) as usize) {
            *o = o.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_and_clamped() {
        let mut s = Shares::new(10);
        let l = |min, max| Some(ShareLimits { min_blocks: min, max_blocks: max });
        assert!(matches!(s.set(0, l(5, 4)), Err(ShareError::MinAboveMax { .. })));
        assert!(matches!(s.set(0, l(0, 0)), Err(ShareError::MinAboveMax { .. })));
        assert!(!s.is_active());
        s.set(0, l(5, 100)).unwrap();
        assert_eq!(s.limits(0), Some(ShareLimits { min_blocks: 5, max_blocks: 10 }));
        assert!(matches!(s.set(1, l(5, 10)), Err(ShareError::MinsFillTheCache { .. })));
        s.set(1, l(4, 10)).unwrap();
        assert!(s.is_active());
        // Volume 0 at its min: no victim of volume 1, a victim of itself.
        let k = |vol, b| ember_trace::block_key(vol, b);
        for b in 0..5 {
            s.inserted(k(0, b));
        }
        assert!(!s.may_evict(1, k(0, 0)) && s.may_evict(0, k(0, 0)));
        s.inserted(k(0, 5));
        assert!(s.may_evict(1, k(0, 0)), "above its min");
        assert!(!s.must_evict(1, 6) && s.must_evict(1, 10));
    }
}
