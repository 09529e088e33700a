//! A replacement policy under the volumes' [`Shares`] (`crate::shares`): an allocation that
//! must make room asks the policy for its first victim the shares allow
//! ([`Replacement::evict_where`]), then inserts into the room. Everything else passes
//! through. Its cost on a hit is one virtual call more than the policy alone; on an
//! allocation, the policy's walk past the blocks the shares protect.
//!
//! What "the first victim the shares allow" means is each policy's own, written on its
//! `evict_where`; every one keeps the blocks the shares refuse where they stand, and with
//! every block allowed picks the victim the policy alone would:
//!
//! - LRU, FIFO: the least recently used (inserted) allowed block.
//! - CLOCK: the hand as alone, past refused blocks without aging them (their counter stays);
//!   an allowed block with a non-zero counter is decremented and passes behind the hand.
//! - SIEVE: the hand as alone, past refused blocks without clearing their visited bit.
//! - SLRU: the probationary segment from its LRU end, then each protected segment upwards.
//! - 2Q: the queue `reclaimfor` would take from, then the other, each from its old end.
//! - LFU: the lowest count, the block that reached it first among equals.
//! - LRU-K: the blocks of fewer than K accesses, inserted first first, then the oldest K-th
//!   most recent access.
//!
//! The others are refused with shares ([`WithShares::takes`]): their victim depends on the
//! block being inserted (ARC's and CAR's `REPLACE` look it up in a ghost list, LIRS and
//! CLOCK-Pro move it between resident and non-resident status) or on state that walking past
//! refused blocks would have to change in a way the paper does not define (S3-FIFO's moves
//! from `S` to `M`, MQ's queues, LFU-DA's age set by its victim, the sampled and learned
//! ones).

use super::{Kind, Replacement, Spec};
use crate::shares::Shares;
use crate::Access;
use ember_trace::key_volume;

/// `inner` under `shares`.
pub struct WithShares {
    inner: Box<dyn Replacement>,
    shares: Shares,
}

impl WithShares {
    /// `inner` under `shares`, whose occupancy MUST count exactly `inner`'s resident blocks
    /// (none for an empty policy); `inner` given back, unchanged, if it cannot pick a
    /// victim under a filter (only the policies that implement [`Replacement::evict_where`]
    /// take shares).
    pub fn new(
        mut inner: Box<dyn Replacement>,
        shares: Shares,
    ) -> Result<WithShares, Box<dyn Replacement>> {
        if !takes_filter(inner.as_mut()) {
            return Err(inner);
        }
        Ok(WithShares { inner, shares })
    }

    /// True if a policy of `spec` takes shares.
    pub fn takes(spec: impl Into<Spec>) -> bool {
        takes_filter(super::build(spec, 1).as_mut())
    }

    /// The policies that take shares, by name (for a refusal's message).
    pub fn policies() -> Vec<&'static str> {
        Kind::ALL.iter().filter(|k| Self::takes(**k)).map(|k| k.name()).collect()
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

/// True if `p` picks a victim under a filter (asked with a filter that refuses every block,
/// which changes nothing).
fn takes_filter(p: &mut dyn Replacement) -> bool {
    p.evict_where(&mut |_| false).is_some()
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

    fn take_unshared(&mut self) -> Option<Box<dyn Replacement>> {
        let empty = Box::new(super::Lru::new(0));
        self.shares = Shares::new(0);
        Some(std::mem::replace(&mut self.inner, empty))
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
        WithShares::new(build(Spec::from(Kind::Lru), capacity), shares).ok().unwrap()
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
        assert!(WithShares::new(build(Spec::from(Kind::Arc), 8), Shares::new(8)).is_err());
    }

    /// The policies that take shares, each checked by the tests below.
    const TAKING: &[&str] = &["lru", "fifo", "clock", "sieve", "slru", "2q", "lfu", "lruk"];

    #[test]
    fn the_policies_that_take_shares_are_named() {
        assert_eq!(WithShares::policies(), TAKING);
        assert!(!WithShares::takes(Kind::Arc) && !WithShares::takes(Kind::S3Fifo));
    }

    /// Each policy's filtered eviction, with every block allowed, picks the victim its own
    /// insertion would, and leaves the same state: a twin that evicts through
    /// `evict_where` before each insertion into a full cache gives the same outcomes as the
    /// policy alone on a skewed trace. (2Q is checked with its ghost queue off: its new
    /// block's `A1out` lookup comes after the eviction, see `TwoQ::evict_where`.)
    #[test]
    fn an_eviction_that_allows_every_block_is_the_policys_own() {
        let keys = crate::replacement::testing::skewed_keys(20_000, 400, 0x9E37_79B9);
        for name in TAKING {
            let spec: Spec =
                if *name == "2q" { "2q:kout=0".parse().unwrap() } else { name.parse().unwrap() };
            for cap in [1usize, 7, 64] {
                let (mut alone, mut twin) = (build(spec, cap), build(spec, cap));
                for (t, &k) in keys.iter().enumerate() {
                    let a = Access::read(k, t as u64);
                    let want = alone.access(&a);
                    let got = if twin.lookup(&a) {
                        (true, None)
                    } else {
                        let v = if twin.len() >= cap {
                            twin.evict_where(&mut |_| true).unwrap()
                        } else {
                            None
                        };
                        assert_eq!(twin.insert(&a), None, "{name} {cap} at {t}: room was made");
                        (false, v)
                    };
                    assert_eq!(got, want, "{name} {cap} at {t}");
                }
            }
        }
    }

    /// Under every policy that takes shares: a volume at its min keeps its blocks through
    /// another volume's scan, a volume at its max never holds more, and a filter that
    /// allows nothing changes nothing.
    #[test]
    fn every_policy_keeps_a_min_share_through_a_scan_and_holds_a_max_share() {
        for name in TAKING {
            let spec: Spec = name.parse().unwrap();
            let mut shares = Shares::new(20);
            shares.set(1, Some(ShareLimits { min_blocks: 8, max_blocks: 20 })).unwrap();
            shares.set(2, Some(ShareLimits { min_blocks: 0, max_blocks: 5 })).unwrap();
            let mut c = WithShares::new(build(spec, 20), shares).ok().unwrap();
            for _ in 0..3 {
                for b in 0..8 {
                    c.access(&read(1, b));
                }
            }
            for b in 0..300 {
                c.access(&read(0, b));
                if b % 3 == 0 {
                    c.access(&read(2, b));
                }
                let s = c.shares().unwrap();
                assert!(s.occupancy(2) <= 5, "{name}: volume 2 above its max at {b}");
                assert_eq!(
                    s.occupancy(0) + s.occupancy(1) + s.occupancy(2),
                    c.len() as u64,
                    "{name}: counts"
                );
                assert!(c.len() <= 20);
            }
            assert_eq!(resident_of(&c, 1, 0..8), 8, "{name}: the min share survives the scan");
            let two = c.shares().unwrap().occupancy(2);
            assert!((1..=5).contains(&two), "{name}: volume 2 holds {two}");
            let before = c.len();
            assert_eq!(c.evict_where(&mut |_| false), Some(None), "{name}");
            assert_eq!(c.len(), before, "{name}: a refusing filter evicts nothing");
        }
    }

    #[test]
    fn a_policy_taken_out_of_its_shares_keeps_its_blocks() {
        let mut c = lru_with(4, &[(1, 2, 4)]);
        for b in 0..3 {
            c.access(&read(1, b));
        }
        let mut inner = c.take_unshared().unwrap();
        assert_eq!(inner.len(), 3);
        assert!(inner.contains(block_key(1, 2)));
        assert!(inner.take_unshared().is_none(), "a policy alone");
    }
}
