//! The flusher's side of the dirty map (thesis 4.4): its next batch, a version reaching
//! backing, and what holds it back: the fences of TRIM and WRITE_ZEROES (`fences`), the
//! versions it is writing now (`in_flight`), the requests of ordered write-back that go to
//! backing directly (`holds`). Its control fields (`flush_target`, `drain`, `stop`,
//! `closing`, `flush_error_gen`, `last_flush_error`) are set by the flows under the same lock.
//! A flushed version that is its key's newest turns clean and joins the replacement policy,
//! whose victim is logged for the counters (`evicted_log`). Calls the dirty map and the
//! index.
//!
//! Lock: every method runs under `Inner::state` (`core.rs`: … → `state` → nothing else); none
//! takes another lock or does I/O.

use super::{CacheState, DIRTY};
use ember_policy::{Access, NEVER};
use ember_trace::Op;

impl CacheState {
    /// Raise a fence over the block keys `keys` (a TRIM or WRITE_ZEROES in progress): until
    /// it is lowered, no key in it is allocated or flushed (with `epoch`, ordered
    /// write-back: no version of that epoch or a later one is flushed). Returns its id.
    pub fn raise_fence(&mut self, keys: std::ops::Range<u64>, epoch: Option<u64>) -> u64 {
        self.fences.raise(keys, epoch)
    }

    /// Lower the fence `id`.
    pub fn lower_fence(&mut self, id: u64) {
        self.fences.lower(id);
    }

    /// Is `key` inside a fence?
    pub fn fenced(&self, key: u64) -> bool {
        self.fences.covers(key)
    }

    /// May the flusher not write the version of `key` of `epoch` now (a fence over it that
    /// is not an ordered fence of a later epoch)?
    pub fn fenced_for_flush(&self, key: u64, epoch: u64) -> bool {
        self.fences.bars_flush(key, epoch)
    }

    /// The flusher is about to write `key`'s dirty version of `epoch` to backing, holding
    /// neither its stripe lock nor (once it has read it) its pin (see [`inflight`]).
    pub fn mark_flushing(&mut self, key: u64, epoch: u64) {
        self.in_flight.mark(key, epoch);
    }

    /// The flusher's write of `key` ended (flushed or failed). Returns whether a newer
    /// version of `key` in the same epoch was committed meanwhile: then the flusher must not
    /// call [`CacheState::flushed`] for it (the version it wrote may not be the one the dirty
    /// map names now, even in the same cache block).
    pub fn unmark_flushing(&mut self, key: u64) -> bool {
        self.in_flight.unmark(key)
    }

    /// Forget every in-flight mark (a flusher panic; the engine is poisoned).
    pub fn clear_flushing(&mut self) {
        self.in_flight.clear();
    }

    /// Is the flusher writing the dirty version of any key in `keys` to backing now?
    pub fn flushing_in(&self, keys: std::ops::Range<u64>) -> bool {
        self.in_flight.any_in(keys)
    }

    /// Ordered write-back: a request of the current epoch will go to backing directly;
    /// until [`CacheState::release_hold`], no version of a later epoch is flushed. Returns
    /// the epoch.
    pub fn hold(&mut self) -> u64 {
        let e = self.current_epoch;
        *self.holds.entry(e).or_default() += 1;
        e
    }

    /// The request holding `epoch` is done.
    pub fn release_hold(&mut self, epoch: u64) {
        if let Some(n) = self.holds.get_mut(&epoch) {
            *n -= 1;
            if *n == 0 {
                self.holds.remove(&epoch);
            }
        }
    }

    /// Ordered write-back: has every epoch older than `epoch` reached backing (no dirty
    /// version and no request, or switch's drain, holding one)?
    pub fn older_epochs_done(&self, epoch: u64) -> bool {
        self.oldest_dirty_epoch().is_none_or(|e| e >= epoch)
            && self.first_hold().is_none_or(|h| h >= epoch)
    }

    /// The flusher's next batch: up to `max` versions of the oldest dirty epoch, as
    /// (epoch, key, cache block) in ascending block order. `lru` picks the least recently
    /// written versions of the epoch (thesis 4.4.1's LRU order; superseded versions first),
    /// otherwise the lowest blocks (ascending order).
    /// Nothing while a request holds an older epoch (ordered write-back), or a switch's drain
    /// holds back the epochs after its own (`live.rs`). Versions of keys the flusher has in
    /// flight are left out: while a batch is written, the next one it reads holds other keys
    /// of the same epoch (the epoch stays the oldest until that batch is marked clean).
    ///
    /// In ascending order, the lowest blocks *above the highest one in flight* come first,
    /// then (from the epoch's start again) those below it: the flusher sweeps the epoch, and
    /// a batch costs its own length, not a walk past the thousands of versions a sync group
    /// holds in flight. With nothing in flight, the lowest blocks.
    pub fn flush_batch(&self, max: usize, lru: bool) -> Vec<(u64, u64, u32)> {
        let Some((&e, _)) = self.epochs.first_key_value() else { return Vec::new() };
        if self.first_hold().is_some_and(|h| h < e) {
            return Vec::new();
        }
        let versions = |keys: std::ops::RangeInclusive<u64>| {
            self.dirty
                .range((e, *keys.start())..=(e, *keys.end()))
                .map(|(&(e, k), &c)| (e, k, c))
                .filter(|v| !self.in_flight.contains(v.1))
        };
        if !lru {
            let Some(high) = self.in_flight.highest().filter(|&k| k < u64::MAX) else {
                return versions(0..=u64::MAX).take(max).collect();
            };
            let mut out: Vec<_> = versions(high + 1..=u64::MAX).take(max).collect();
            if out.len() < max {
                let wrapped: Vec<_> = versions(0..=high).take(max - out.len()).collect();
                out.splice(0..0, wrapped);
            }
            return out;
        }
        let versions = versions(0..=u64::MAX);
        let mut by_age: Vec<(u32, (u64, u64, u32))> = versions
            .map(|v| {
                let last = if self.get(v.1) == Some(v.2) { self.lists.last(v.2) } else { 0 };
                (last, v)
            })
            .collect();
        by_age.sort_unstable_by_key(|&(last, v)| (last, v.1));
        let mut out: Vec<(u64, u64, u32)> = by_age.into_iter().take(max).map(|x| x.1).collect();
        out.sort_unstable_by_key(|v| v.1);
        out
    }

    /// A dirty version reached backing (durably): it leaves the dirty map; if it is the
    /// newest version it becomes clean (evictable), otherwise its block is released. The
    /// caller still holds its pin.
    pub fn flushed(&mut self, epoch: u64, key: u64, c: u32, time_ns: u64) {
        if self.dirty.get(&(epoch, key)) != Some(&c) {
            return;
        }
        self.dirty_remove(epoch, key);
        self.dec_epoch(epoch);
        self.touch(key);
        if self.get(key) != Some(c) {
            self.deref_block(c);
            return;
        }
        self.refs[c as usize] -= 1;
        // It keeps its last-access time (thesis 4.4.1, 5.1): clean and dirty blocks form one
        // global LRU, so a block written long ago is evicted soon after its flush. In the
        // recency list it already stands there.
        self.flags[c as usize] &= !DIRTY;
        self.clean += 1;
        self.lists.became_evictable(c);
        if self.recency_policy {
            // LRU would evict only if every block were clean before this one: not possible.
            return;
        }
        let last = self.lists.last(c);
        // Only LRU places a block by age; the walk passes the dirty blocks accessed since.
        let younger = if self.replacement.name() == "lru" {
            let flags = &self.flags;
            self.lists
                .newer_where(c, |b| flags[b as usize] & DIRTY == 0)
                .map(|b| self.keys[b as usize])
        } else {
            None
        };
        let acc = Access { key, time_ns, op: Op::Read, vtime: u64::from(last), next_vtime: NEVER };
        if let Some(victim) = self.replacement.insert_aged(&acc, younger) {
            if victim != key && self.unmap(victim) {
                self.evicted_log.push(victim);
            }
        }
    }
}
