//! The array side of exclusive caching as a [`Replacement`] policy, so the real cache
//! (`ember serve --array-scheme`) runs the very [`ArrayCache`] the simulator runs
//! (`ember demote`): a READ hit is [`ArrayCache::read`] on a held block, a READ miss that
//! the engine fills is [`ArrayCache::read`] on an absent one (the disk read), and a DEMOTE
//! is [`ArrayCache::demote`].
//!
//! The engine calls [`Replacement::lookup`] for every block a request touches and
//! [`Replacement::insert`] for each miss it fills, so a lookup of an absent block changes
//! nothing (the ghosts learn of the miss at its insertion): one array READ is one
//! `ArrayCache::read`, as in the simulator.

use super::{ArrayCache, ArrayConfig, DemoteOutcome};
use crate::{Access, Replacement};

/// An [`ArrayCache`] behind the [`Replacement`] interface.
#[derive(Clone, Debug)]
pub struct ArrayReplacement {
    cache: ArrayCache,
}

impl ArrayReplacement {
    /// The array cache `config` describes; fails if its segment layout is invalid.
    pub fn new(config: ArrayConfig) -> Result<Self, String> {
        Ok(Self { cache: ArrayCache::new(config)? })
    }

    /// The array cache itself (its ghosts, its order).
    pub fn cache(&self) -> &ArrayCache {
        &self.cache
    }
}

impl Replacement for ArrayReplacement {
    fn name(&self) -> &'static str {
        match self.cache.config().scheme {
            super::Scheme::NoneLru => "none-lru",
            super::Scheme::DemoteLru => "demote-lru",
            super::Scheme::Demote => "demote",
            super::Scheme::DemoteSlru => "demote-slru",
            super::Scheme::DemoteAdaptUni => "demote-adapt-uni",
            super::Scheme::DemoteAdaptExp => "demote-adapt-exp",
        }
    }

    fn capacity(&self) -> usize {
        self.cache.config().capacity
    }

    fn len(&self) -> usize {
        self.cache.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.cache.contains(key)
    }

    fn lookup(&mut self, access: &Access) -> bool {
        self.cache.contains(access.key) && self.cache.read(access.key)
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        let (_, ejected) = self.cache.read_evicting(access.key);
        if self.cache.config().capacity == 0 {
            return Some(access.key);
        }
        ejected
    }

    fn remove(&mut self, key: u64) -> bool {
        self.cache.remove(key)
    }

    fn takes_demotes(&self) -> bool {
        self.cache.config().scheme.demotes()
    }

    fn demote(&mut self, access: &Access) -> Option<(DemoteOutcome, Option<u64>)> {
        if !self.takes_demotes() {
            return None;
        }
        Some(self.cache.demote_evicting(access.key))
    }

    fn memory_bytes(&self) -> usize {
        self.cache.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demote::Scheme;

    /// The same READ / DEMOTE sequence through the adapter, driven the way the engine drives
    /// it (lookup, then insert on a miss), and through the simulator's `ArrayCache` directly,
    /// gives the same hits and the same order, for every scheme.
    #[test]
    fn adapter_matches_the_array_cache_the_simulator_runs() {
        for scheme in Scheme::ALL {
            let config = ArrayConfig::new(64, scheme);
            let mut sim = ArrayCache::new(config).unwrap();
            let mut live = ArrayReplacement::new(config).unwrap();
            let mut x = 12345u64;
            let (mut sim_hits, mut live_hits) = (0, 0);
            for t in 0..20_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = x % 200;
                if scheme.demotes() && x.is_multiple_of(3) {
                    let a = sim.demote(key);
                    let b = live.demote(&Access::read(key, t)).unwrap().0;
                    assert_eq!(a, b, "{scheme} demote {key} at {t}");
                } else {
                    sim_hits += sim.read(key) as u64;
                    let acc = Access::read(key, t);
                    if live.lookup(&acc) {
                        live_hits += 1;
                    } else if let Some(v) = live.insert(&acc) {
                        assert!(!live.contains(v), "{scheme}: evicted {v} still held");
                    }
                }
            }
            assert_eq!(sim_hits, live_hits, "{scheme}");
            assert!(live_hits > 1000, "{scheme}: only {live_hits} hits");
            assert_eq!(sim.keys(), live.cache().keys(), "{scheme}");
            assert_eq!(live.takes_demotes(), scheme.demotes());
        }
    }

    #[test]
    fn stored_demote_reports_the_ejected_block() {
        let mut a = ArrayReplacement::new(ArrayConfig::new(2, Scheme::Demote)).unwrap();
        assert_eq!(a.insert(&Access::read(1, 0)), None);
        assert_eq!(a.insert(&Access::read(2, 1)), None);
        let (outcome, ejected) = a.demote(&Access::read(3, 2)).unwrap();
        assert_eq!(outcome, DemoteOutcome::Stored);
        assert_eq!(ejected, Some(2), "DEMOTE ejects the block read last: the discard end");
        assert_eq!(a.demote(&Access::read(3, 3)).unwrap(), (DemoteOutcome::Aborted, None));
        let none = ArrayReplacement::new(ArrayConfig::new(2, Scheme::NoneLru)).unwrap();
        assert!(!none.takes_demotes());
    }
}
