//! Allocation, eviction and invalidation of clean blocks (thesis 4.1: clean blocks are
//! evictable): a miss asks the admission sieve (`admission`), an allocation the replacement
//! policy (`replacement`; with `recency_policy`, LRU, the recency list itself), a DEMOTE
//! (array tier) is placed as the policy's scheme says, and keys evicted outside an
//! allocation's result are logged for the counters (`evicted_log`). Calls the index and the
//! fences of `flush.rs`.
//!
//! Lock: every method runs under `Inner::state` (`core.rs`: … → `state` → nothing else); none
//! takes another lock or does I/O.

use super::{CacheState, DEMOTED};
use ember_policy::{Access, Admission as _};

/// Outcome of an allocation.
pub(crate) struct Allocation {
    /// The cache block, pinned and mapped, or None if no block could be freed.
    pub cache_block: Option<u32>,
    /// Keys evicted to make room.
    pub evicted: Option<u64>,
    /// The cache block the evicted key held (its data stays there until the block is
    /// written again): the client tier reads its DEMOTE's copy from it. With `reclaimed`, the
    /// block the reclaimed key held, which is the block allocated.
    pub victim_block: Option<u32>,
    /// The clean key evicted outside the policy's choice to free the block allocated: the
    /// policy chose no victim and no block was free, because dirty blocks (or blocks the
    /// persisted dirty map still names) hold the others, as under the write-back policies.
    /// The oldest clean block leaves, logged for the counters with every such eviction
    /// (`evicted_log`), and is the allocation's victim: the client tier demotes it as it
    /// demotes the policy's (Wong & Wilkes 1.1: a client demotes the clean blocks it ejects).
    pub reclaimed: Option<u64>,
    /// The block is the victim's, which requests in flight still pin
    /// ([`CacheState::allocate_fill`]): the caller writes it only once
    /// [`CacheState::taken_block_ready`] says so. `victim_block` is then None (its data may
    /// not be there yet: nothing of it is demoted).
    pub after_pins: bool,
}

/// What a taker of a cache block may do ([`CacheState::taken_block_ready`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TakenBlock {
    /// Requests other than the block's takers still pin it.
    Wait,
    /// Write the block (then unpin it).
    Write,
    /// The taker's key left the block: unpin it without writing.
    Gone,
    /// The taker gave up waiting; its key was dropped: unpin the block without writing.
    GaveUp,
}

/// What became of a DEMOTE of one block ([`CacheState::demote_install`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DemoteStep {
    /// The replacement policy is not an array scheme that takes DEMOTEs.
    NotTaken,
    /// Aborted: the block is cached already (clean: the policy placed it as demoted).
    Cached,
    /// Aborted: no room (capacity 0, every reclaimable block pinned, a fence).
    NoRoom,
    /// Refused by the admission sieve (`ember_policy::demote::DemoteAdmission::Sieve`).
    Refused,
    /// Stored: the block is mapped clean in this cache block, pinned; the caller writes the
    /// data, then unpins (or invalidates on failure).
    Stored(u32),
    /// Stored as [`DemoteStep::Stored`], in the block of the victim the scheme ejected, which
    /// requests in flight still pin (a fill of the victim still reading backing, a hit still
    /// reading the block): the block is the DEMOTE's at once, but the caller writes the data
    /// only once [`CacheState::taken_block_ready`] says so, when no request but the block's
    /// takers pins it, so the fill cannot overwrite it and the hit reads the victim's bytes.
    StoredAfterPins(u32),
}

impl CacheState {
    /// A client's block access and whether it hit, for the sequential cutoff and the
    /// admission sieve (both see every client access, in request order, as in `ember sim`).
    pub fn observe(&mut self, acc: &Access, hit: bool) {
        self.seq_cutoff.observe(acc);
        self.admission.observe(acc, hit);
    }

    /// On a miss, before the sieve: does the sequential cutoff refuse the block (it
    /// continues a stream past its threshold)? Under the `full` policy only a full cache
    /// cuts (every cache block holding a newest version).
    pub fn cut(&mut self, acc: &Access) -> bool {
        self.seq_cutoff.cuts(acc, self.index.len(), self.pins.len())
    }

    /// On a miss: ask the admission sieve, telling it the occupancy first (OCF's nhit
    /// promotes everything below its trigger occupancy).
    pub fn admit(&mut self, acc: &Access) -> bool {
        self.admission.set_occupancy(self.index.len(), self.pins.len());
        self.admission.admit(acc)
    }

    /// A hit: tell the replacement policy (clean blocks), pin and return the cache block.
    pub fn hit_pin(&mut self, acc: &Access) -> Option<u32> {
        let c = self.get(acc.key)?;
        self.lists.move_to_head(c);
        if !self.recency_policy && !self.is_dirty(c) {
            self.replacement.lookup(acc);
        }
        self.pins[c as usize] += 1;
        Some(c)
    }

    /// [`CacheState::reserve_for_write`] for no key in particular (tests).
    #[cfg(test)]
    pub fn reserve(&mut self) -> Option<u32> {
        self.reserve_taking().map(|(c, _)| c)
    }

    /// Take a free block for the new version of `key`, a write-back write's block
    /// (no-overwrite: a write hit takes a new block too), evicting the least recently used
    /// clean blocks if none is free (the replacement policy then forgets them). A clean
    /// cached version of `key` first becomes the newest block, as a hit does, so the block
    /// freed is another's, never the old version's (`ember_policy::demote::new_version_room`).
    /// The block comes back pinned and unreferenced: [`CacheState::commit_dirty`] maps it
    /// once its data is written, or [`CacheState::unpin`] returns it. With it, the key whose
    /// eviction freed it, if one was evicted: its data is still in the block, for the client
    /// tier's DEMOTE (`ember_policy::demote`'s client side).
    pub fn reserve_for_write(&mut self, key: u64) -> Option<(u32, Option<u64>)> {
        if let Some(c) = self.get(key).filter(|&c| !self.is_dirty(c)) {
            self.lists.move_to_head(c);
        }
        self.reserve_taking()
    }

    /// A free block, pinned, evicting clean blocks if none is free; with the evicted key
    /// whose block it is.
    fn reserve_taking(&mut self) -> Option<(u32, Option<u64>)> {
        let freed = if self.lists.free_len() == 0 { self.evict_for_room(8).1 } else { None };
        let c = self.lists.free_pop()?;
        self.pins[c as usize] = 1;
        self.flags[c as usize] = 0;
        Some((c, freed.filter(|&(_, b)| b == c).map(|(k, _)| k)))
    }

    /// Evict up to `tries` clean blocks, oldest first, until one block is free. Returns the
    /// number evicted.
    #[cfg(test)]
    pub fn evict_clean(&mut self, tries: usize) -> u64 {
        self.evict_for_room(tries).0
    }

    /// Evict up to `tries` clean blocks, oldest first, until one block is free. Returns the
    /// number evicted, and the key whose eviction freed a block and that block (None if none
    /// came free).
    fn evict_for_room(&mut self, tries: usize) -> (u64, Option<(u64, u32)>) {
        let mut n = 0;
        let mut freed = None;
        while self.lists.free_len() == 0 && (n as usize) < tries {
            let Some(c) = self.oldest_clean() else { break };
            let key = self.keys[c as usize];
            self.evicted_log.push(key);
            if !self.recency_policy {
                self.replacement.remove(key);
            }
            self.unlist(key, c);
            self.deref_block(c);
            n += 1;
            if self.lists.free_len() > 0 {
                freed = Some((key, c));
            }
        }
        (n, freed)
    }

    /// Allocate a cache block for the missed `acc.key` (a clean block: a fill, or a
    /// write-through allocation), evicting if the policy says so. The block comes back mapped
    /// and pinned; its content is written by the caller before it releases the block's stripe
    /// lock.
    pub fn allocate(&mut self, acc: &Access) -> Allocation {
        self.allocate_within(acc, &[])
    }

    /// [`CacheState::allocate`] for a request that holds `own`, the cache blocks it pinned
    /// (its hits, and the blocks allocated for its earlier misses). If the policy's victim is
    /// one of them, pinned by this request alone, its block goes to `acc.key` at once (the
    /// caller then treats that earlier access as not cached: its data goes to backing only),
    /// as `ember sim`, which has no pins, reuses a victim's room at once. Without it, a
    /// policy that does not move a block on a hit (FIFO, 2Q's first queue) can pick a block
    /// the same request just hit, and one that can evict its newest block (Random, LIRS's
    /// HIR queue, W-TinyLFU's window) a block the same request just allocated, and the
    /// allocation would be refused for want of a free block.
    pub fn allocate_within(&mut self, acc: &Access, own: &[u32]) -> Allocation {
        self.allocate_in(acc, own, false)
    }

    /// [`CacheState::allocate_within`] for a READ miss's fill. Under an array scheme, when
    /// no block is free and the victim's block is still pinned by requests in flight (other
    /// than this one), the block goes to `acc.key` all the same
    /// ([`Allocation::after_pins`]): under DEMOTE a READ miss places its block at the
    /// discard end, so when the array is full the next READ miss of another client ejects
    /// the block the first is still filling from backing. The simulator reuses that room at
    /// once; refusing the allocation would leave the array one allocation-write short.
    pub fn allocate_fill(&mut self, acc: &Access, own: &[u32]) -> Allocation {
        self.allocate_in(acc, own, self.replacement.takes_demotes())
    }

    /// [`CacheState::allocate_within`], taking a victim's pinned block if `take_pinned`.
    fn allocate_in(&mut self, acc: &Access, own: &[u32], take_pinned: bool) -> Allocation {
        let evicted = if self.recency_policy {
            // LRU's insert: when every cache block holds a clean block, the oldest leaves.
            if self.clean >= self.pins.len() && self.clean > 0 {
                self.oldest_clean().map(|c| self.keys[c as usize])
            } else {
                None
            }
        } else {
            self.replacement.insert(acc)
        };
        let victim_block = evicted.and_then(|v| self.get(v));
        let mut after_pins = false;
        let (placed, reclaimed) = match self.place_clean(acc.key, evicted, false) {
            (None, _) => match victim_block {
                Some(c) if own.contains(&c) => (self.adopt(acc.key, c), None),
                Some(c) if take_pinned => {
                    let taken = self.take_pinned(acc.key, c, false);
                    after_pins = taken.is_some();
                    (taken, None)
                }
                _ => (None, None),
            },
            placed => placed,
        };
        match placed {
            Some(c) => Allocation {
                cache_block: Some(c),
                evicted,
                victim_block: if after_pins {
                    None
                } else if reclaimed.is_some() {
                    Some(c)
                } else {
                    victim_block
                },
                reclaimed,
                after_pins,
            },
            None => {
                // Every free block is still pinned by readers of evicted keys, or holds dirty
                // or persisted data.
                if !self.recency_policy {
                    self.replacement.remove(acc.key);
                }
                Allocation {
                    cache_block: None,
                    evicted,
                    victim_block,
                    reclaimed: None,
                    after_pins: false,
                }
            }
        }
    }

    /// Map `key` clean to `c`, an unmapped block whose only pin is the caller's (a hit of the
    /// same request whose key was just evicted); the pin carries over. None if anyone else
    /// still holds `c`.
    fn adopt(&mut self, key: u64, c: u32) -> Option<u32> {
        let i = c as usize;
        if self.refs[i] != 0 || self.pins[i] != 1 || self.prefs[i] != 0 {
            return None;
        }
        self.map(key, c, false);
        self.refs[i] += 1;
        self.flags[i] = 0;
        Some(c)
    }

    /// Give `key`, which the policy just placed (evicting `evicted`), a free block: mapped
    /// clean, pinned, flagged `demoted` or not. If the policy evicted nothing and no block is
    /// free (dirty blocks live outside the policy), the oldest clean blocks are evicted; the
    /// second value is then the evicted key whose block `key` took. None if no block could
    /// be freed.
    fn place_clean(
        &mut self,
        key: u64,
        evicted: Option<u64>,
        demoted: bool,
    ) -> (Option<u32>, Option<u64>) {
        if let Some(v) = evicted {
            self.unmap(v);
        }
        let mut freed = None;
        if self.lists.free_len() == 0 && evicted.is_none() {
            freed = self.evict_for_room(8).1;
        }
        let Some(c) = self.lists.free_pop() else { return (None, None) };
        self.map(key, c, false);
        let i = c as usize;
        self.refs[i] += 1;
        self.pins[i] = 1;
        self.flags[i] = if demoted { DEMOTED } else { 0 };
        (Some(c), freed.filter(|&(_, b)| b == c).map(|(k, _)| k))
    }

    /// A DEMOTE of `acc.key` (array tier): the replacement policy places it as its scheme
    /// says; a stored block gets a cache block, mapped clean and pinned, like
    /// [`CacheState::allocate`]'s.
    pub fn demote_install(&mut self, acc: &Access) -> (DemoteStep, Option<u64>) {
        if self.recency_policy || !self.replacement.takes_demotes() {
            return (DemoteStep::NotTaken, None);
        }
        if let Some(c) = self.get(acc.key) {
            if !self.is_dirty(c) {
                // Held: the scheme moves it to the demoted position (an aborted DEMOTE).
                self.replacement.demote(acc);
            }
            return (DemoteStep::Cached, None);
        }
        if self.fenced(acc.key) {
            return (DemoteStep::NoRoom, None);
        }
        let (resident, capacity) = (self.index.len(), self.pins.len());
        if !self.demote_admission.admits(&mut self.admission, acc, resident, capacity) {
            return (DemoteStep::Refused, None);
        }
        let Some((outcome, evicted)) = self.replacement.demote(acc) else {
            return (DemoteStep::NotTaken, None);
        };
        if outcome == ember_policy::demote::DemoteOutcome::Aborted {
            return (DemoteStep::NoRoom, None);
        }
        let victim_block = evicted.and_then(|v| self.get(v));
        match self.place_clean(acc.key, evicted, true).0 {
            Some(c) => (DemoteStep::Stored(c), evicted),
            // No free block: the victim's is still pinned by requests in flight (under the
            // DEMOTE scheme typically the fill of the block another client's READ just
            // missed, which the scheme put at the discard end). The scheme stored the DEMOTE
            // and ejected the victim, as the simulator does; the DEMOTE takes that block.
            None => match victim_block.and_then(|c| self.take_pinned(acc.key, c, true)) {
                Some(c) => (DemoteStep::StoredAfterPins(c), evicted),
                None => {
                    self.replacement.remove(acc.key);
                    (DemoteStep::NoRoom, evicted)
                }
            },
        }
    }

    /// Map `key` clean to `c`, the block of a victim just unmapped that only pins of
    /// requests in flight still hold (no reference, no persist mark), flagged `demoted` or
    /// not and pinned for the caller, who becomes one of its takers: it writes the block once
    /// [`CacheState::taken_block_ready`] says so. None if anything but pins holds `c`.
    fn take_pinned(&mut self, key: u64, c: u32, demoted: bool) -> Option<u32> {
        let i = c as usize;
        if self.refs[i] != 0 || self.prefs[i] != 0 || self.pins[i] == 0 {
            return None;
        }
        self.map(key, c, false);
        self.refs[i] += 1;
        self.pins[i] += 1;
        self.flags[i] = if demoted { DEMOTED } else { 0 };
        *self.takers.entry(c).or_insert(0) += 1;
        Some(c)
    }

    /// A taker of cache block `c` for `key` ([`CacheState::take_pinned`]) asks whether it
    /// may write the block: `Gone` if its key left the block meanwhile (evicted, the block
    /// perhaps taken again: nothing to write, as the simulator places the key and evicts it
    /// at once); else `Wait` while requests other than the block's takers still pin it, then
    /// `Write` (it is no longer a taker: a later taker of the block waits for its write).
    /// With `give_up` it stops waiting: `GaveUp`, its key dropped. Every answer but `Wait`
    /// ends its turn as a taker; the caller unpins the block after it.
    pub fn taken_block_ready(&mut self, c: u32, key: u64, give_up: bool) -> TakenBlock {
        let takers = self.takers.get(&c).copied().unwrap_or(0);
        let mine = self.get(key) == Some(c);
        if mine && !give_up && self.pins[c as usize] > takers {
            return TakenBlock::Wait;
        }
        match self.takers.get_mut(&c) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                self.takers.remove(&c);
            }
        }
        if !mine {
            TakenBlock::Gone
        } else if give_up {
            self.invalidate_if(key, c);
            TakenBlock::GaveUp
        } else {
            TakenBlock::Write
        }
    }

    /// Drop a clean `key` from the map and the policy (TRIM, partial overwrite, failed I/O).
    /// A dirty key is left alone (returns false): dirty data is dropped only by
    /// [`CacheState::drop_all_versions`], once backing holds something newer.
    pub fn invalidate(&mut self, key: u64) -> bool {
        match self.get(key) {
            Some(c) if !self.is_dirty(c) => {
                self.unmap(key);
                if !self.recency_policy {
                    self.replacement.remove(key);
                }
                true
            }
            _ => false,
        }
    }

    /// Invalidate every clean resident key in `keys`; returns how many. Costs the smaller of
    /// the range and the map.
    pub fn invalidate_range(&mut self, keys: std::ops::Range<u64>) -> u64 {
        let list: Vec<u64> = if keys.end.saturating_sub(keys.start) > self.len() as u64 {
            self.lists
                .oldest_first()
                .map(|c| self.keys[c as usize])
                .filter(|k| keys.contains(k))
                .collect()
        } else {
            keys.collect()
        };
        list.iter().filter(|&&k| self.invalidate(k)).count() as u64
    }

    /// Invalidate `key` only if it still maps to `cache_block` (it may have been evicted).
    pub fn invalidate_if(&mut self, key: u64, cache_block: u32) -> bool {
        if self.get(key) == Some(cache_block) {
            self.invalidate(key)
        } else {
            false
        }
    }

    /// Keys evicted since the last call (see `evicted_log`).
    pub fn take_evicted(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.evicted_log)
    }
}
