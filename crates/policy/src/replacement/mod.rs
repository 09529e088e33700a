//! Replacement orders: which resident block to evict when room is needed.
//!
//! Every policy implements [`Replacement`] over uniform-size blocks with a capacity counted in
//! blocks, so the simulator and the engine can use any of them. [`Kind`] names them all and
//! [`Spec`] adds a policy's parameters (`lruk:k=3`, checked against the table in the
//! policy's file; [`catalog`] holds the citations); [`build`] makes a boxed one and
//! [`with_replacement!`](crate::with_replacement) a concrete one for a monomorphized hot loop.
//!
//! All share one layout: a [`KeyMap`](crate::keymap::KeyMap) (key → `u32` slot) over a
//! preallocated [`Slab`](crate::slab::Slab) of nodes linked into intrusive lists. Nothing
//! allocates after construction.

pub mod arc;
pub mod cacheus;
pub mod car;
pub mod catalog;
pub mod clock;
pub mod clock_pro;
mod count_min;
pub mod demote_outcome;
mod experts;
pub mod fifo;
mod frequency_buckets;
pub mod hyperbolic;
pub mod kind;
pub mod lecar;
pub mod lfu;
pub mod lfu_da;
pub mod lhd;
pub mod lirs;
pub mod lru;
pub mod lru_k;
pub mod lru_log;
pub mod mq;
mod multi_list;
pub mod opt;
pub mod params;
#[cfg(test)]
mod pinned;
mod priority_buckets;
mod queue;
pub mod random;
pub mod registry;
pub mod s3fifo;
mod sampled;
pub mod sieve;
pub mod slru;
pub mod spec;
#[cfg(test)]
pub(crate) mod testing;
pub mod two_q;
pub mod w_tinylfu;
pub mod with_shares;

pub use arc::Arc;
pub use cacheus::Cacheus;
pub use car::Car;
pub use clock::Clock;
pub use clock_pro::ClockPro;
pub use demote_outcome::DemoteOutcome;
pub use fifo::Fifo;
pub use hyperbolic::Hyperbolic;
pub use kind::{Info, Kind, UnknownKind};
pub use lecar::LeCaR;
pub use lfu::Lfu;
pub use lfu_da::LfuDa;
pub use lhd::Lhd;
pub use lirs::Lirs;
pub use lru::Lru;
pub use lru_k::LruK;
pub use lru_log::LruLog;
pub use mq::Mq;
pub use opt::Opt;
pub use params::{Domain, Param};
pub use random::Random;
pub use registry::build;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;
pub use slru::{Slru, SlruInsert};
pub use spec::{FromSpec, Spec, SpecError};
pub use two_q::TwoQ;
pub use w_tinylfu::WTinyLfu;
pub use with_shares::WithShares;

/// A replacement policy over a fixed number of block slots.
///
/// The caller drives it per block access: [`Replacement::lookup`] first; on a miss, if the
/// admission policy allows, [`Replacement::insert`]. Hits and insertions update the policy's
/// order; lookups of absent blocks leave it unchanged (ghost lists may still learn from them
/// at insert time).
pub trait Replacement: Send {
    /// Short lowercase name, as used on the command line (`lru`, `arc`, ...).
    fn name(&self) -> &'static str;

    /// Capacity in blocks.
    fn capacity(&self) -> usize;

    /// Number of resident blocks.
    fn len(&self) -> usize;

    /// True if no block is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if `key` is resident. Does not change the order.
    fn contains(&self, key: u64) -> bool;

    /// An access to `access.key`: if resident, record the hit and return true; otherwise
    /// return false and change nothing resident.
    fn lookup(&mut self, access: &crate::Access) -> bool;

    /// Make `access.key`, which must not be resident, resident, evicting if the cache is full.
    /// Returns the evicted block, if any.
    fn insert(&mut self, access: &crate::Access) -> Option<u64>;

    /// Remove `key` if resident (invalidation: TRIM, overwrite elsewhere). Returns true if it
    /// was resident.
    fn remove(&mut self, key: u64) -> bool;

    /// Make `access.key` resident as a block whose last access lies in the past: just older
    /// than `younger` (the resident block whose last access is the next newer one), or the
    /// newest if `younger` is `None`. The real cache's write-back uses it for a dirty block
    /// that was flushed: it rejoins the clean blocks at its last-access time, so the clean
    /// and dirty lists act as one global LRU (Qin's thesis, 4.4.1 and 5.1). Policies
    /// without a recency order insert as [`Replacement::insert`] does (the default).
    fn insert_aged(&mut self, access: &crate::Access, younger: Option<u64>) -> Option<u64> {
        let _ = younger;
        self.insert(access)
    }

    /// Lookup and, on a miss, insert: the common path when every miss is allocated.
    /// Returns (hit, evicted block).
    fn access(&mut self, access: &crate::Access) -> (bool, Option<u64>) {
        if self.lookup(access) {
            (true, None)
        } else {
            (false, self.insert(access))
        }
    }

    /// Evict the first resident block, in the policy's own eviction order, that `ok`
    /// accepts: `Some(Some(key))`, or `Some(None)` if it accepts none (nothing changes).
    /// How per-volume shares ([`crate::shares`]) steer a policy: the policy keeps its order,
    /// the shares say which victims are allowed. `None` if the policy cannot (the default):
    /// it then takes no shares.
    ///
    /// - MUST pick, when `ok` accepts every block, the victim an insertion into the full
    ///   cache would evict (so shares that never bind change little), and leave the
    ///   policy as that eviction would, short of the new block.
    /// - MUST leave the blocks `ok` refuses resident where they stand in the order.
    /// - MUST call `ok` as often as it likes (it has no side effect).
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        let _ = ok;
        None
    }

    /// The per-volume shares the policy runs under ([`WithShares`]); `None`
    /// for a policy alone (the default).
    fn shares_mut(&mut self) -> Option<&mut crate::shares::Shares> {
        None
    }

    /// [`Replacement::shares_mut`], to read.
    fn shares(&self) -> Option<&crate::shares::Shares> {
        None
    }

    /// The policy a [`WithShares`] runs under the shares, taken out of it (the wrapper is
    /// left empty, to be dropped); `None` for a policy alone (the default).
    fn take_unshared(&mut self) -> Option<Box<dyn Replacement>> {
        None
    }

    /// True if the policy is the array side of Wong & Wilkes' exclusive caching and takes
    /// DEMOTEs ([`Replacement::demote`]). The default says no.
    fn takes_demotes(&self) -> bool {
        false
    }

    /// A client DEMOTEs `access.key`, a clean block it evicts (Wong & Wilkes). `None` if the
    /// policy takes no DEMOTEs (the default). Otherwise the outcome: `Stored` means the key is
    /// now resident and the caller must give it the client's data, `Aborted` that nothing
    /// moves (the key was resident and was placed where the scheme puts demoted blocks, or
    /// there is no room); and the block evicted to make room, if any.
    fn demote(&mut self, access: &crate::Access) -> Option<(DemoteOutcome, Option<u64>)> {
        let _ = access;
        None
    }

    /// A hint that `key` will be accessed soon: start loading its index bucket. Replaying
    /// a trace, calling it for the access some 8-16 positions ahead hides most of the index's
    /// memory latency. Changes nothing observable; the default does nothing.
    #[inline]
    fn prefetch(&self, key: u64) {
        let _ = key;
    }

    /// [`Replacement::prefetch`] that also returns a hint for the same key's
    /// [`Replacement::access_hinted`] (the policies over a [`KeyMap`](crate::keymap::KeyMap):
    /// the key's index fingerprint, so the lookup does not hash the key again). The default
    /// prefetches and returns 0.
    #[inline]
    fn prefetch_hint(&self, key: u64) -> u32 {
        self.prefetch(key);
        0
    }

    /// The second stage of a prefetch: given the hint [`Replacement::prefetch_hint`] returned
    /// for a key some accesses earlier (its index group should be loaded by now), start
    /// loading the key's own node if it is resident. The default does nothing.
    #[inline]
    fn prefetch_resident(&self, hint: u32) {
        let _ = hint;
    }

    /// [`Replacement::access`], given the hint [`Replacement::prefetch_hint`] returned for
    /// `access.key` (and no other key). The default ignores the hint.
    #[inline]
    fn access_hinted(&mut self, access: &crate::Access, hint: u32) -> (bool, Option<u64>) {
        let _ = hint;
        self.access(access)
    }

    /// True if the policy's whole order is the recency of access, and a full cache evicts its
    /// least recently used block (LRU). A caller that keeps every block on its own list by
    /// last access (the real cache does, per cache block) may then use that list instead of
    /// the policy and save the policy's index. The default says no.
    fn recency_only(&self) -> bool {
        false
    }

    /// Bytes of memory the policy's own structures occupy (index, nodes, ghosts), all
    /// reserved at construction. 0 if the policy does not report it.
    fn memory_bytes(&self) -> usize {
        0
    }
}

/// For each position of a key sequence, the index of the next occurrence of the same key,
/// or [`crate::NEVER`]: the oracle [`crate::Access::next_vtime`] that OPT needs.
pub fn next_vtimes(keys: &[u64]) -> Vec<u64> {
    let mut next = vec![crate::NEVER; keys.len()];
    let mut seen: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    for (t, &k) in keys.iter().enumerate().rev() {
        if let Some(later) = seen.insert(k, t as u64) {
            next[t] = later;
        }
    }
    next
}

#[cfg(test)]
mod tests {
    /// Every policy gives the same outcomes through the hinted access (the hint computed
    /// ahead, as the simulator's records loop does) as through the plain one. (Seen failing
    /// with FIFO's hint changed to `fp ^ 2`.)
    #[test]
    fn hinted_access_equals_access_for_every_policy() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let keys: Vec<u64> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x & 1 == 0 {
                    (x >> 8) % 50
                } else {
                    (x >> 8) % 3000
                }
            })
            .collect();
        for &kind in super::Kind::ALL.iter().filter(|k| !k.needs_oracle()) {
            for cap in [0usize, 1, 64, 1000] {
                let (mut plain, mut hinted) = (super::build(kind, cap), super::build(kind, cap));
                let mut hits = 0;
                for (t, &k) in keys.iter().enumerate() {
                    let a = crate::Access::read(k, t as u64);
                    let want = plain.access(&a);
                    // Hinted and plain accesses mixed on one instance, and a plain lookup
                    // after each: a hint that is not what the plain path computes shows.
                    let got = if t % 3 == 0 {
                        hinted.access(&a)
                    } else {
                        let hint = hinted.prefetch_hint(k);
                        hinted.access_hinted(&a, hint)
                    };
                    assert_eq!(got, want, "{kind:?} {cap} at {t}");
                    assert_eq!(hinted.contains(k), plain.contains(k), "{kind:?} {cap} at {t}");
                    hits += usize::from(want.0);
                }
                assert!(cap < 64 || hits > 1000, "{kind:?} {cap}: {hits} hits");
            }
        }
    }

    /// Every policy (each with its default parameters, and libCacheSim's variants) changes
    /// its resident set on an access only as the access reports: a hit changes nothing, a
    /// miss adds the key and removes at most the one block [`super::Replacement::insert`]
    /// returns. The real cache frees a cache block only for a block the policy reports, so a
    /// block that left unreported would stay cached there while the simulator misses it.
    /// (Seen failing with `wtinylfu:lcs` when a winning window candidate's swap with the
    /// main victim went on to the next candidate: several blocks left, one was reported.)
    #[test]
    fn every_policy_reports_each_block_that_leaves() {
        use std::collections::HashSet;
        let keys = super::testing::skewed_keys(30_000, 3000, 0x2545_F491_4F6C_DD1D);
        let mut specs: Vec<super::Spec> = super::Kind::ALL
            .iter()
            .filter(|k| !k.needs_oracle())
            .map(|&k| super::Spec::new(k))
            .collect();
        for extra in ["wtinylfu:lcs", "cacheus:lcs", "lfuda:lcs", "mq:lcs", "slru:4:lcs"] {
            specs.push(extra.parse().unwrap_or_else(|e| panic!("{extra}: {e}")));
        }
        for spec in specs.iter().filter(|s| !s.evicts_on_hits()) {
            for cap in [1usize, 64, 500] {
                let mut p = super::build(spec, cap);
                let mut model: HashSet<u64> = HashSet::new();
                for (t, &k) in keys.iter().enumerate() {
                    let (hit, left) = p.access(&crate::Access::read(k, t as u64));
                    assert_eq!(hit, model.contains(&k), "{spec} {cap} at {t}: hit");
                    if !hit {
                        model.insert(k);
                        if let Some(v) = left {
                            assert!(model.remove(&v), "{spec} {cap} at {t}: {v} left twice");
                        }
                    }
                    assert_eq!(p.len(), model.len(), "{spec} {cap} at {t}: unreported eviction");
                    if t % 97 == 0 {
                        assert!(model.iter().all(|&m| p.contains(m)), "{spec} {cap} at {t}");
                    }
                }
            }
        }
    }

    #[test]
    fn next_vtimes_points_at_the_next_occurrence() {
        assert_eq!(
            super::next_vtimes(&[1, 2, 1, 3, 2, 1]),
            vec![2, 4, 5, crate::NEVER, crate::NEVER, crate::NEVER]
        );
    }
}
