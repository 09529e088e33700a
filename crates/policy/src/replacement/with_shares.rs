//! A replacement policy under the volumes' [`Shares`] (`crate::shares`): an allocation that must make room asks the policy
//! for its first victim the shares allow ([`Replacement::evict_where`]), then inserts into
//! the room. Everything else passes through. Its cost on a hit is one virtual call more
//! than the policy alone; on an allocation, the policy's walk past the blocks the shares
//! protect.

use super::Replacement;
use crate::shares::Shares;
use crate::Access;
use ember_trace::key_volume;

/// `inner` under `shares`.
pub struct WithShares {
    inner: Box<dyn Replacement>,
    shares: Shares,
}

impl WithShares {
    /// `inner`, empty, under `shares`; `None` if `inner` cannot pick a victim under a filter
    /// (only the policies that implement [`Replacement::evict_where`] take shares).
    pub fn new(mut inner: Box<dyn Replacement>, shares: Shares) -> Option<WithShares> {
        inner.evict_where(&mut |_| false)?;
        Some(WithShares { inner, shares })
    }

    /// Make room for a block of `volume` if the shares say so; the evicted block.
    fn make_room(&mut self, volume: u32) -> Option<u64> {
        if !self.shares.must_evict(volume, self.inner.len()) {
            return None;
        }
        let shares = &self.shares;
        let victim = self.inner.evict_where(&mut |k| shares.may_evict(volume, k)).flatten();
        if let Some(v) = victim {
            self.shares.removed(v);
        }
        victim
    }
}

impl Replacement for WithShares {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.inner.contains(key)
    }

    fn lookup(&mut self, access: &Access) -> bool {
        self.inner.lookup(access)
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        let victim = self.make_room(key_volume(access.key));
        // With room made (or none needed), the policy evicts only if the filter found no
        // victim in a full cache.
        let forced = self.inner.insert(access);
        if let Some(f) = forced {
            self.shares.removed(f);
        }
        self.shares.inserted(access.key);
        victim.or(forced)
    }

    fn insert_aged(&mut self, access: &Access, younger: Option<u64>) -> Option<u64> {
        let victim = self.make_room(key_volume(access.key));
        let forced = self.inner.insert_aged(access, younger);
        if let Some(f) = forced {
            self.shares.removed(f);
        }
        if self.inner.contains(access.key) {
            self.shares.inserted(access.key);
        }
        victim.or(forced)
    }

    fn remove(&mut self, key: u64) -> bool {
        let was = self.inner.remove(key);
        if was {
            self.shares.removed(key);
        }
        was
    }

    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        let victim = self.inner.evict_where(ok)?;
        if let Some(v) = victim {
            self.shares.removed(v);
        }
        Some(victim)
    }

    fn shares_mut(&mut self) -> Option<&mut Shares> {
        Some(&mut self.shares)
    }

    fn shares(&self) -> Option<&Shares> {
        Some(&self.shares)
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::{build, Kind, Spec};
    use crate::shares::{ShareLimits, Shares};
    use ember_trace::block_key;

    fn read(vol: u32, block: u64) -> Access {
        Access::read(block_key(vol, block), 0)
    }

    fn lru_with(capacity: usize, limits: &[(u32, u64, u64)]) -> WithShares {
        let mut shares = Shares::new(capacity);
        for &(v, min, max) in limits {
            shares.set(v, Some(ShareLimits { min_blocks: min, max_blocks: max })).unwrap();
        }
        WithShares::new(build(Spec::from(Kind::Lru), capacity), shares).unwrap()
    }

    fn resident_of(c: &WithShares, vol: u32, blocks: std::ops::Range<u64>) -> usize {
        blocks.filter(|&b| c.contains(block_key(vol, b))).count()
    }

    #[test]
    fn a_volume_at_its_max_evicts_its_own_blocks_even_with_room_left() {
        let mut c = lru_with(10, &[(1, 0, 3)]);
        for b in 0..8 {
            c.access(&read(1, b));
        }
        assert_eq!(c.len(), 3, "volume 1 holds at most 3 of 10 blocks");
        assert_eq!(resident_of(&c, 1, 5..8), 3, "its newest");
        for b in 0..7 {
            c.access(&read(0, b));
        }
        assert_eq!(resident_of(&c, 0, 0..7), 7);
        assert_eq!(resident_of(&c, 1, 0..8), 3, "volume 0 filled the room volume 1 could not take");
    }

    #[test]
    fn a_volume_under_its_min_is_no_victim_of_another_volumes_scan() {
        let mut c = lru_with(10, &[(1, 4, 10)]);
        for _ in 0..2 {
            for b in 0..4 {
                c.access(&read(1, b));
            }
        }
        // A scan of volume 0, longer than the cache.
        for b in 0..100 {
            c.access(&read(0, b));
        }
        assert_eq!(resident_of(&c, 1, 0..4), 4, "the guaranteed share survives the scan");
        assert_eq!(c.len(), 10);
        // Volume 1's own allocations evict its least recently used blocks too (the min
        // protects it only from the others), then volume 0's.
        for b in 4..10 {
            c.access(&read(1, b));
        }
        assert_eq!(resident_of(&c, 1, 0..4), 0, "its own oldest went first");
        assert_eq!(resident_of(&c, 1, 4..10), 6, "then it took volume 0's room");
    }

    #[test]
    fn shares_that_never_bind_leave_the_policy_unchanged() {
        // The same trace through LRU alone and under shares that never bind.
        let mut alone = build(Spec::from(Kind::Lru), 8);
        let mut wrapped = lru_with(8, &[(0, 0, 8), (1, 0, 8)]);
        let mut x = 7u64;
        for _ in 0..2000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let a = read((x >> 60) as u32 & 1, (x >> 33) % 20);
            assert_eq!(alone.access(&a), wrapped.access(&a));
        }
        // A policy without a filtered eviction takes no shares.
        assert!(WithShares::new(build(Spec::from(Kind::Arc), 8), Shares::new(8)).is_none());
    }
}
