//! LRU kept as a log of accesses: the same decisions as [`Lru`](super::Lru), laid out for a
//! state far larger than the processor's caches.
//!
//! A linked recency list finds each victim by following the tail's link, one dependent load
//! an eviction, and a hit relinks two neighbours that lie anywhere in memory. Over a state of
//! tens of megabytes each of those loads waits for memory, and a chain of dependent loads
//! cannot be prefetched further than one link ahead (perf, LRU at 1 M blocks over 100 M
//! Zipf(0.9) requests: a third of the time on the victim-after-next's node).
//!
//! Here the resident keys sit in an array in the order of their last access, oldest first:
//! the log. An access appends its key at the log's head and points the key's index entry at
//! it; a hit also marks the key's old place dead (one bit). The victim is the first live entry
//! from the log's tail, found by a sequential scan whose index groups are prefetched a fixed
//! distance ahead. When the head reaches the end of the array, the live entries are slid
//! down to its start in order (a compaction; their index entries are re-pointed, prefetched
//! ahead the same way), which frees the rest. No load depends on another one's result except
//! through the index, and every index group is loaded ahead of its use.
//!
//! A compaction reads the log once and moves at most `capacity` keys (each re-pointed in the
//! index: a load of its index group, which is most of a compaction's time), so the more
//! places beyond the capacity, the rarer compactions are. Places are as narrow as the keys
//! allow: while every key inserted fits in 32 bits (block numbers of volumes under 16 TiB,
//! the generators' keys) a place is 4 bytes and the log has `3.5 * capacity` places, a
//! compaction every `2.5 * capacity` appends at least; the first wider key widens the log
//! once (compacted into 8-byte places, `2 * capacity - capacity / 16` of them, a compaction
//! every `capacity - capacity / 16` appends). Memory per block of capacity, with the 16-byte
//! index and a bit of liveness per place: 30.4 bytes narrow, 31.7 wide, within the 32 of
//! the linked list either way.
//!
//! A narrow key is also its own index tag: the tag is a bijection of the key
//! ([`narrow_tag`](crate::keymap::narrow_tag): a mix of the key plus one, never 0, the empty
//! tag), so a tag match in the index *is* the
//! key and a lookup reads the index group alone ([`KeyMap::find_exact`]); a wide log tags by
//! [`fingerprint`] and confirms a match by reading the key's place, as every other policy
//! does. (perf, LRU at 1M blocks over 100M requests: that confirming load was 8 % of the
//! samples, and its prefetch more.) Widening re-indexes the keys by fingerprint; the hints
//! the simulator takes ahead ([`Replacement::prefetch_hint`]) are tags of the width they
//! were taken at, so a wide log takes each key's fingerprint anew.
//!
//! FIFO's [`KeyRing`](crate::ring::KeyRing) is the same idea for a queue whose hits never
//! reorder it: a hole is rare there (an invalidation), so it marks none (a place is live when
//! the index maps its key to it) and keeps a quarter of slack. Under LRU every hit leaves a
//! hole, so liveness is a bit here (the victim scan needs no index probe for a hole) and the
//! slack is nearly the capacity (a quarter would compact every `capacity / 4` hits). One ring
//! parameterized by its liveness mark and slack could serve both; not done.
//!
//! It cannot place a block by an age in the past ([`Replacement::insert_aged`] falls back to
//! a plain insertion), so only the simulator's monomorphized runs use it, and only where the
//! state outgrows the caches ([`LruLog::preferred`]); every other user of LRU has the list.

mod log;
mod place;

use super::Replacement;
use crate::keymap::{fingerprint, KeyMap};
use crate::Access;
use log::LogOf;
use place::Place;

/// Least-recently-used replacement over a log of accesses (see the module documentation):
/// 4-byte places while every key fits, 8-byte ones from the first key that does not.
#[derive(Clone, Debug)]
pub struct LruLog {
    log: Width,
}

/// The log at its current width.
#[derive(Clone, Debug)]
enum Width {
    Narrow(LogOf<u32>),
    Wide(LogOf<u64>),
}

/// Run `$body` on the log, whichever its width, as `$l`.
macro_rules! either {
    ($self:expr, $l:ident => $body:expr) => {
        match $self {
            Width::Narrow($l) => $body,
            Width::Wide($l) => $body,
        }
    };
}

impl LruLog {
    /// An empty LRU cache of `capacity` blocks.
    ///
    /// # Panics
    /// If the log's places do not fit in `u32` slots (a capacity over 2^30 blocks).
    pub fn new(capacity: usize) -> Self {
        Self { log: Width::Narrow(LogOf::new(capacity, KeyMap::with_entries(capacity))) }
    }

    /// Resident keys from most to least recently used (O(log length); for tests).
    pub fn keys(&self) -> Vec<u64> {
        either!(&self.log, l => l.keys())
    }

    /// `key`'s index tag at the log's width, 0 for a key too wide for a narrow log.
    #[inline(always)]
    fn tag_of(&self, key: u64) -> u32 {
        match &self.log {
            Width::Narrow(_) => match <u32 as Place>::of(key) {
                Some(_) => <u32 as Place>::tag(key),
                None => 0,
            },
            Width::Wide(_) => fingerprint(key),
        }
    }

    /// Whether the log's places are 8 bytes wide (a key over 32 bits was inserted).
    pub fn is_wide(&self) -> bool {
        matches!(self.log, Width::Wide(_))
    }

    /// True where the log pays for itself: a state (index and log) larger than what stays in
    /// the caches closest to the core, where the linked list's loads wait for memory. Below
    /// that the list takes fewer instructions. Measured by bench/sim-throughput
    /// (docs/benchmarks.md).
    pub fn preferred(capacity: usize) -> bool {
        capacity.saturating_mul(32) > super::queue::DEEP_PREFETCH_BYTES
    }

    /// Widen the log to 8-byte places: compacted, the same keys in the same order at the
    /// same places, indexed anew by their fingerprints (the narrow index's tags are the keys'
    /// own, [`Place::EXACT`]).
    #[cold]
    #[inline(never)]
    fn widen(&mut self) {
        let Width::Narrow(n) = &mut self.log else { return };
        self.log = Width::Wide(n.widened());
    }
}

impl Replacement for LruLog {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn capacity(&self) -> usize {
        either!(&self.log, l => l.capacity)
    }

    #[inline]
    fn len(&self) -> usize {
        either!(&self.log, l => l.len)
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        either!(&self.log, l => l.contains(key))
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        either!(&mut self.log, l => l.lookup(access.key))
    }

    #[inline]
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.access(access).1
    }

    fn remove(&mut self, key: u64) -> bool {
        either!(&mut self.log, l => l.remove(key))
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, self.tag_of(access.key))
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let tag = self.tag_of(key);
        if tag != 0 {
            either!(&self.log, l => l.map.prefetch_fp(tag));
        }
        tag
    }

    /// Loads the log place of the first index entry with the hint's fingerprint (where the
    /// lookup confirms the key).
    #[inline(always)]
    fn prefetch_resident(&self, hint: u32) {
        either!(&self.log, l => l.prefetch_resident(hint))
    }

    /// The hint is the key's index tag at the log's width when the hint was taken
    /// ([`LruLog::prefetch_hint`]). A narrow log trusts it; a wide one takes the key's
    /// fingerprint anew, as hints taken before the log widened are narrow tags.
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        let key = access.key;
        if let Width::Narrow(l) = &mut self.log {
            if let Some(outcome) = l.access_fp(key, hint) {
                return outcome;
            }
            self.widen();
        }
        match &mut self.log {
            Width::Wide(l) => l.access_fp(key, fingerprint(key)).unwrap_or((false, None)),
            Width::Narrow(_) => unreachable!("widen leaves a wide log"),
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.prefetch_hint(key);
    }

    fn recency_only(&self) -> bool {
        true
    }

    fn memory_bytes(&self) -> usize {
        either!(&self.log, l => l.memory_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{check_evicts_least_recently_used, misses, run, skewed_keys};
    use crate::replacement::Lru;

    #[test]
    fn evicts_least_recently_used() {
        check_evicts_least_recently_used(LruLog::new(3), LruLog::keys);
    }

    /// The same hits and victims as the linked-list LRU, access by access, over streams long
    /// enough for hundreds of compactions at every capacity (the log of capacity 1 has two
    /// places and compacts at almost every access).
    #[test]
    fn decides_as_the_linked_list_lru_across_many_compactions() {
        for &(capacity, universe) in &[(1usize, 3u64), (2, 5), (7, 20), (64, 100), (1000, 5000)] {
            let keys = skewed_keys(200_000, universe, 88172645463325252 ^ capacity as u64);
            let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
            let got = run(&mut log, &keys);
            assert_eq!(got, run(&mut list, &keys), "capacity {capacity}");
            assert!(misses(&got) > 0 && misses(&got) < keys.len(), "capacity {capacity}");
            assert_eq!(log.keys(), list.keys(), "capacity {capacity}");
            assert_eq!(log.len(), list.len());
        }
    }

    #[test]
    fn remove_frees_a_place_and_the_rest_keep_their_order() {
        let mut log = LruLog::new(3);
        run(&mut log, &[1, 2, 3]);
        assert!(log.remove(2));
        assert!(!log.remove(2) && !log.contains(2));
        assert_eq!(log.len(), 2);
        // Room again: 4 evicts nothing; then 5 evicts 1, the least recently used.
        assert_eq!(run(&mut log, &[4, 5]), vec![(false, None), (false, Some(1))]);
        assert_eq!(log.keys(), vec![5, 4, 3]);
        // Removals and accesses mixed, against the list, through many compactions.
        let keys = skewed_keys(50_000, 300, 7);
        let (mut log, mut list) = (LruLog::new(100), Lru::new(100));
        for (t, &k) in keys.iter().enumerate() {
            if t % 7 == 3 {
                assert_eq!(log.remove(k), list.remove(k), "remove {k} at {t}");
            } else {
                let a = Access::read(k, t as u64);
                assert_eq!(log.access(&a), list.access(&a), "access {k} at {t}");
            }
        }
        assert_eq!(log.keys(), list.keys());
    }

    #[test]
    fn capacity_zero_keeps_nothing() {
        let mut zero = LruLog::new(0);
        assert_eq!(run(&mut zero, &[1, 1]), vec![(false, None), (false, None)]);
        assert_eq!(zero.len(), 0);
        assert!(!zero.contains(1));
    }

    /// Keys spread over the whole 64-bit range (no two share their low 32 bits).
    fn wide(keys: &[u64]) -> Vec<u64> {
        keys.iter().map(|&k| k << 32 | 0x9E37 ^ k).collect()
    }

    #[test]
    fn wide_keys_decide_as_the_linked_list_lru() {
        for &(capacity, universe) in &[(1usize, 3u64), (7, 20), (1000, 5000)] {
            let keys = wide(&skewed_keys(100_000, universe, 31 ^ capacity as u64));
            let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
            assert_eq!(run(&mut log, &keys), run(&mut list, &keys), "capacity {capacity}");
            assert!(log.is_wide());
            assert_eq!(log.keys(), list.keys(), "capacity {capacity}");
        }
    }

    /// The first key over 32 bits widens the log in the middle of a stream, at every phase of
    /// its compaction cycle, with hits, evictions and removals before and after.
    #[test]
    fn widening_mid_stream_keeps_every_decision() {
        for &(capacity, universe) in &[(1usize, 3u64), (2, 5), (64, 100), (1000, 5000)] {
            let narrow = skewed_keys(60_000, universe, 5 ^ capacity as u64);
            for widen_at in [0usize, 1, 777, 12_345, 33_333, 59_998] {
                let mut keys = narrow.clone();
                // From widen_at on (an access, not a removal), every third key is the wide
                // twin of a narrow one.
                for (t, k) in keys.iter_mut().enumerate().skip(widen_at) {
                    if (t - widen_at) % 3 == 0 {
                        *k |= 1 << 40;
                    }
                }
                let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
                let mut accessed_wide = false;
                for (t, &k) in keys.iter().enumerate() {
                    if t % 11 == 5 {
                        assert_eq!(log.remove(k), list.remove(k), "remove {k} at {t}");
                    } else {
                        let a = Access::read(k, t as u64);
                        assert_eq!(log.access(&a), list.access(&a), "access {k} at {t}");
                    }
                    // Widened exactly by the first wide key accessed (a removal inserts none).
                    accessed_wide |= t % 11 != 5 && k >> 32 != 0;
                    assert_eq!(log.is_wide(), accessed_wide, "at {t}");
                }
                assert!(log.is_wide(), "capacity {capacity}, widened at {widen_at}");
                assert_eq!(log.keys(), list.keys(), "capacity {capacity}, widened at {widen_at}");
                assert_eq!(log.len(), list.len());
            }
        }
    }

    /// Driven as `ember sim` drives it: each key's hint taken 16 accesses ahead, so hints
    /// taken while the log was narrow are used after it widened; the edge keys of the narrow
    /// width (0, the largest narrow key, `u32::MAX`, the first wide key) included.
    #[test]
    fn hints_taken_ahead_stay_right_across_widening() {
        const AHEAD: usize = 16;
        for &(capacity, universe) in &[(2usize, 6u64), (64, 100), (1000, 5000)] {
            let mut keys = skewed_keys(80_000, universe, 99 ^ capacity as u64);
            for (t, k) in keys.iter_mut().enumerate() {
                match t % 97 {
                    0 => *k = 0,
                    1 => *k = u64::from(u32::MAX) - 1,
                    2 if t > 40_000 => *k = u64::from(u32::MAX),
                    3 if t > 50_000 => *k = 1 << 32,
                    _ => {}
                }
            }
            let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
            let mut hints: Vec<u32> =
                keys.iter().take(AHEAD).map(|&k| log.prefetch_hint(k)).collect();
            let mut widened = false;
            for (t, &k) in keys.iter().enumerate() {
                let hint = hints[t % AHEAD];
                if let Some(&next) = keys.get(t + AHEAD) {
                    hints[t % AHEAD] = log.prefetch_hint(next);
                }
                log.prefetch_resident(hint);
                let a = Access::read(k, t as u64);
                assert_eq!(log.access_hinted(&a, hint), list.access(&a), "access {k} at {t}");
                // Widened by the first key that is not below 2^32 - 1.
                widened |= k >= u64::from(u32::MAX);
                assert_eq!(log.is_wide(), widened, "at {t}");
            }
            assert!(log.is_wide());
            assert_eq!(log.keys(), list.keys(), "capacity {capacity}");
        }
    }

    #[test]
    fn memory_is_at_most_thirty_two_bytes_per_block_at_either_width() {
        let mut log = LruLog::new(1_000_000);
        let narrow = log.memory_bytes() as f64 / 1e6;
        assert!(narrow <= 32.0, "{narrow} bytes a block (narrow)");
        log.access(&Access::read(1 << 40, 0));
        assert!(log.is_wide());
        let wide = log.memory_bytes() as f64 / 1e6;
        assert!(wide <= 32.0, "{wide} bytes a block (wide)");
        assert!(narrow < wide, "narrow {narrow} wide {wide}");
        assert!(LruLog::preferred(1_000_000) && !LruLog::preferred(100_000));
    }
}
