//! What the live changes of `live/` need of the state: a write-policy switch's drain
//! (`switch_drain`, `persist_upto`, `switch_hold`), the closed epochs a flush on demand waits for
//! (`flush_alls`, read by the dirty map's `commit_dirty`), advancing the epoch within the
//! stored window (`layout::epoch`), entering and leaving write-back persist's persisted map,
//! a new replacement policy rebuilt from the resident set, the policy put under per-volume
//! shares and taken out of them, a new admission sieve, and the
//! occupancy per volume (`resident_by_volume`, `dirty_by_volume`, kept by the index and the
//! dirty map). Calls the dirty map, the flusher's side, persist and the index.
//!
//! Lock: every method runs under `Inner::state` (`core.rs`: … → `state` → nothing else); none
//! takes another lock or does I/O.

use super::{CacheState, Persisted, DIRTY};
use crate::layout::epoch::WINDOW;
use ember_policy::replacement::Lru;
use ember_policy::{Access, Admission, Replacement, NEVER};
use ember_trace::Op;

/// A write-policy switch's drain of the former policy's dirty blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drain {
    /// No switch drains anything.
    None,
    /// A switch stored its new policy and waits for the old policy's requests: its drain
    /// begins once they are done (so their versions are in the drained epochs too).
    Starting,
    /// The epochs up to this one hold the former policy's dirty versions (and the old
    /// policy's requests are done); the drain ends when none is left.
    Upto(u64),
}

impl CacheState {
    /// Dirty versions of the epochs up to `epoch` (cost: the number of dirty epochs).
    pub fn dirty_upto(&self, epoch: u64) -> u64 {
        self.epochs.range(..=epoch).map(|(_, &n)| n as u64).sum()
    }

    /// The oldest epoch a request (ordered write-back) or a switch's drain holds back.
    pub(super) fn first_hold(&self) -> Option<u64> {
        let request = self.holds.first_key_value().map(|(&h, _)| h);
        match (request, self.switch_hold) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Close the current epoch: new writes join the next one. While the persisted dirty map
    /// is kept (`persisting`), every persisted dirty epoch must stay within [`WINDOW`] of the
    /// current one (16 bits of it are stored): the flusher is asked for the epochs older
    /// than half the window, and while one is a whole window old (its backing writes keep
    /// failing) the epoch does not advance. Returns whether the flusher was asked for more.
    pub fn advance_epoch(&mut self, persisting: bool) -> bool {
        if !persisting {
            self.current_epoch += 1;
            return false;
        }
        let age = self.oldest_dirty_epoch().map_or(0, |o| self.current_epoch.saturating_sub(o));
        if age < WINDOW {
            self.current_epoch += 1;
        }
        if age + 1 >= WINDOW / 2 {
            let target = self.current_epoch.saturating_sub(WINDOW / 2);
            self.flush_target = self.flush_target.max(target);
            return true;
        }
        false
    }

    /// A switch's old requests are done: the drain covers every epoch up to the current
    /// one, which closes. With `persisted_only`, a persist snapshot names only versions of
    /// those epochs from now on (leaving write-back persist: the new policy's writes are not
    /// persisted); with `hold`, the flusher writes no later epoch until [`CacheState::end_drain`]
    /// (a write-back policy's data must not reach backing before the drain's commit). The
    /// flusher is asked for every drained epoch. Returns the last drained epoch and the dirty
    /// versions to drain.
    pub fn begin_drain(
        &mut self,
        persisting: bool,
        persisted_only: bool,
        hold: bool,
    ) -> (u64, u64) {
        let upto = self.current_epoch;
        self.advance_epoch(persisting);
        self.switch_drain = Drain::Upto(upto);
        if persisted_only {
            self.persist_upto = upto;
        }
        if hold {
            self.switch_hold = Some(upto);
        }
        self.flush_target = self.flush_target.max(upto);
        (upto, self.dirty_upto(upto))
    }

    /// Is the drain over: no dirty version of a drained epoch, and no request holding one
    /// (ordered write-back's direct requests)? True when no drain runs.
    pub fn drain_done(&self) -> bool {
        match self.switch_drain {
            Drain::None => true,
            Drain::Starting => false,
            Drain::Upto(e) => {
                self.dirty_upto(e) == 0 && self.holds.first_key_value().is_none_or(|(&h, _)| h > e)
            }
        }
    }

    /// Dirty versions the running drain still has to write back (0 when none runs).
    pub fn drain_left(&self) -> u64 {
        match self.switch_drain {
            Drain::Upto(e) => self.dirty_upto(e),
            Drain::None | Drain::Starting => 0,
        }
    }

    /// The drain ended: no hold, snapshots name every version again.
    pub fn end_drain(&mut self) {
        self.switch_drain = Drain::None;
        self.switch_hold = None;
        self.persist_upto = u64::MAX;
    }

    /// Entering write-back persist: from now on changes are tracked, and the persisted dirty
    /// map is the newest dirty version of every key, each block marked persisted. The caller
    /// commits [`CacheState::persisted_entries`] as a checkpoint before any barrier.
    pub fn persist_all(&mut self) {
        self.persist_tracking = true;
        self.touched.clear();
        self.persisted.clear();
        let newest: Vec<(u64, Persisted)> = self
            .dirty_by_key
            .iter()
            .filter_map(|&(key, _)| {
                let c = self.get(key)?;
                let epoch = self.newest_epoch(key, c)?;
                Some((key, Persisted { cache_block: c, epoch }))
            })
            .collect();
        self.persisted.extend(newest);
        self.persist_reset();
    }

    /// Leaving write-back persist, once the device no longer names a persisted map: nothing
    /// is tracked or persisted any more, and the blocks it named may be reused.
    pub fn persist_off(&mut self) {
        self.persist_tracking = false;
        self.touched.clear();
        self.persisted.clear();
        self.persist_reset();
    }

    /// The newest dirty version of `key` a persist snapshot may name (see `persist_upto`).
    pub(super) fn persistable(&self, key: u64) -> Option<Persisted> {
        if self.persist_upto == u64::MAX {
            let c = self.get(key)?;
            let epoch = self.newest_epoch(key, c)?;
            return Some(Persisted { cache_block: c, epoch });
        }
        let &(_, epoch) =
            self.dirty_by_key.range((key, 0)..=(key, self.persist_upto)).next_back()?;
        let &cache_block = self.dirty.get(&(epoch, key))?;
        Some(Persisted { cache_block, epoch })
    }

    /// Put `new` (empty, with the capacity of every cache block) in force, keeping every
    /// resident block: a policy that is only the recency of access (LRU) is the recency list
    /// itself; any other gets every clean block inserted, oldest access first, so its order
    /// starts as the recency of access. The walk costs about one insertion a clean block.
    /// Returns the replaced policy (dropped by the caller, outside the lock).
    pub fn replace_policy(
        &mut self,
        new: Box<dyn Replacement>,
        time_ns: u64,
    ) -> Box<dyn Replacement> {
        if new.recency_only() && new.capacity() == self.pins.len() && new.is_empty() {
            self.recency_policy = true;
            return std::mem::replace(&mut self.replacement, Box::new(Lru::new(0)));
        }
        let old = std::mem::replace(&mut self.replacement, new);
        self.recency_policy = false;
        let clean: Vec<(u64, u32)> = self
            .lists
            .oldest_first()
            .filter(|&c| self.flags[c as usize] & DIRTY == 0)
            .map(|c| (self.keys[c as usize], self.lists.last(c)))
            .collect();
        for (key, last) in clean {
            let acc =
                Access { key, time_ns, op: Op::Read, vtime: u64::from(last), next_vtime: NEVER };
            // The policy holds a block for every cache block: it evicts nothing here.
            if let Some(victim) = self.replacement.insert(&acc) {
                if victim != key && self.unmap(victim) {
                    self.evicted_log.push(victim);
                }
            }
        }
        old
    }

    /// Put the admission sieve `new` in force; returns the replaced one (dropped by the
    /// caller, outside the lock, with everything it counted).
    pub fn replace_admission(&mut self, new: Box<dyn Admission>) -> Box<dyn Admission> {
        self.admission.replace_default(new)
    }

    /// Newest versions resident, and dirty versions, of volume `id`.
    pub fn occupancy(&self, id: u32) -> (u64, u64) {
        self.occupancy.volume(id)
    }

    /// The per-volume shares the replacement policy runs under, if any.
    pub fn replacement_shares(&self) -> Option<&ember_policy::shares::Shares> {
        self.replacement.shares()
    }

    /// [`CacheState::replacement_shares`], to change them.
    pub fn replacement_shares_mut(&mut self) -> Option<&mut ember_policy::shares::Shares> {
        self.replacement.shares_mut()
    }

    /// Put the replacement policy in force under per-volume shares with no limits yet,
    /// keeping every resident block and the policy's order: LRU over the recency list
    /// becomes an LRU of every clean block, oldest access first (as
    /// [`CacheState::replace_policy`] builds it), any other policy is wrapped as it stands,
    /// its clean blocks counted per volume. Nothing is evicted. Refused, with nothing
    /// changed, when the policy cannot pick a victim under the shares' filter (the message
    /// names it and the policies that can). Returns the replaced policy, if any (dropped
    /// by the caller, outside the lock).
    pub fn put_under_shares(
        &mut self,
        time_ns: u64,
    ) -> Result<Option<Box<dyn Replacement>>, String> {
        use ember_policy::replacement::WithShares;
        use ember_policy::shares::Shares;
        let capacity = self.pins.len();
        if self.replacement.shares().is_some() {
            return Ok(None);
        }
        if self.recency_policy {
            let Ok(lru) = WithShares::new(Box::new(Lru::new(capacity)), Shares::new(capacity))
            else {
                return Err("lru cannot take shares".into());
            };
            return Ok(Some(self.replace_policy(Box::new(lru), time_ns)));
        }
        let mut shares = Shares::new(capacity);
        for c in self.lists.oldest_first() {
            let key = self.keys[c as usize];
            if self.flags[c as usize] & DIRTY == 0 && self.replacement.contains(key) {
                shares.inserted(key);
            }
        }
        let alone = std::mem::replace(&mut self.replacement, Box::new(Lru::new(0)));
        match WithShares::new(alone, shares) {
            Ok(w) => self.replacement = Box::new(w),
            Err(alone) => {
                self.replacement = alone;
                return Err(format!(
                    "the replacement policy {} cannot take shares (its victim is not the first \
                     of an order that a filter can walk); the policies that can: {}",
                    self.replacement.name(),
                    WithShares::policies().join(", ")
                ));
            }
        }
        Ok(None)
    }

    /// True if the replacement policy in force can run under shares (LRU over the recency
    /// list can; any other if it picks a victim under a filter).
    pub fn takes_shares(&mut self) -> bool {
        self.recency_policy
            || self.replacement.shares().is_some()
            || self.replacement.evict_where(&mut |_| false).is_some()
    }

    /// The replacement policy out of its shares (none has a limit any more), keeping every
    /// resident block: an LRU goes back to being the recency list, any other runs alone as
    /// it stands. Returns what the caller drops outside the lock.
    pub fn take_out_of_shares(&mut self, time_ns: u64) -> Option<Box<dyn Replacement>> {
        let inner = self.replacement.take_unshared()?;
        if inner.recency_only() {
            // The emptied wrapper leaves; the recency list is the order again.
            let lru = Box::new(Lru::new(self.pins.len()));
            drop(self.replace_policy(lru, time_ns));
            return Some(inner);
        }
        Some(std::mem::replace(&mut self.replacement, inner))
    }

    /// The name of the replacement policy in force.
    pub fn replacement_name(&self) -> &'static str {
        if self.recency_policy {
            "lru"
        } else {
            self.replacement.name()
        }
    }
}
