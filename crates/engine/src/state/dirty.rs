//! The dirty map (thesis 4.2.2): every dirty version by (epoch, key) (`dirty`) and by (key,
//! epoch) (`dirty_by_key`), the versions of each epoch (`epochs`) and the epoch new writes
//! join (`current_epoch`). A no-overwrite write (4.1) commits its version here; every change
//! of a key's dirty versions is recorded for the next persist snapshot (`touched`, with
//! `persist_tracking`). A write over a clean version takes it out of the replacement policy,
//! and a new version supersedes the flusher's in-flight mark of its key (`in_flight`). Calls
//! the index.
//!
//! Lock: every method runs under `Inner::state` (`core.rs`: … → `state` → nothing else); none
//! takes another lock or does I/O.

use super::CacheState;
use ember_trace::Op;

/// The newest version of a block, as [`CacheState::slot`] reports it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// Cache block holding the data.
    pub cache_block: u32,
    /// `Some(epoch)` if the block is newer than backing.
    pub dirty: Option<u64>,
}

impl CacheState {
    /// The epoch of the newest version of `key`, in block `c`, if it is dirty.
    pub(super) fn newest_epoch(&self, key: u64, c: u32) -> Option<u64> {
        if !self.is_dirty(c) {
            return None;
        }
        let e = self
            .dirty_by_key
            .range((key, 0)..=(key, u64::MAX))
            .rev()
            .map(|&(_, e)| e)
            .find(|&e| self.dirty.get(&(e, key)) == Some(&c));
        debug_assert!(e.is_some(), "dirty block {c} of key {key} is not in the dirty map");
        e
    }

    /// Dirty versions (all epochs).
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }

    /// The newest version of `key`, if resident.
    pub fn slot(&self, key: u64) -> Option<Slot> {
        let c = self.get(key)?;
        Some(Slot { cache_block: c, dirty: self.newest_epoch(key, c) })
    }

    /// Every version of `key`, clean or dirty, is dropped: backing now holds newer data
    /// (a write-through fallback, a TRIM, WRITE_ZEROES). Returns how many versions.
    pub fn drop_all_versions(&mut self, key: u64) -> u64 {
        let mut n = 0;
        if let Some(c) = self.get(key) {
            if !self.recency_policy && !self.is_dirty(c) {
                self.replacement.remove(key);
            }
            self.unmap(key);
            n += 1;
        }
        let epochs: Vec<u64> =
            self.dirty_by_key.range((key, 0)..=(key, u64::MAX)).map(|&(_, e)| e).collect();
        for e in epochs {
            if let Some(c) = self.dirty_remove(e, key) {
                self.dec_epoch(e);
                self.deref_block(c);
                n += 1;
            }
        }
        self.touch(key);
        n
    }

    /// Keys in `keys` with any dirty version, ascending (the index: the cost grows with the
    /// versions in the range, not with the dirty map).
    pub fn dirty_keys_in(&self, keys: std::ops::Range<u64>) -> Vec<u64> {
        let mut v: Vec<u64> =
            self.dirty_by_key.range((keys.start, 0)..(keys.end, 0)).map(|&(k, _)| k).collect();
        v.dedup();
        v
    }

    /// Has any key in `keys` a dirty version? (No allocation.)
    pub fn any_dirty_in(&self, keys: std::ops::Range<u64>) -> bool {
        keys.start < keys.end
            && self.dirty_by_key.range((keys.start, 0)..(keys.end, 0)).next().is_some()
    }

    pub(super) fn dirty_insert(&mut self, epoch: u64, key: u64, c: u32) {
        if self.dirty.insert((epoch, key), c).is_none() {
            self.occupancy.dirty(key, 1);
        }
        self.dirty_by_key.insert((key, epoch));
        self.in_flight.supersede(key, epoch);
    }

    pub(super) fn dirty_remove(&mut self, epoch: u64, key: u64) -> Option<u32> {
        self.dirty_by_key.remove(&(key, epoch));
        let c = self.dirty.remove(&(epoch, key));
        if c.is_some() {
            self.occupancy.dirty(key, -1);
        }
        c
    }

    pub(super) fn touch(&mut self, key: u64) {
        if self.persist_tracking {
            self.touched.insert(key);
        }
    }

    pub(super) fn dec_epoch(&mut self, e: u64) {
        if let Some(n) = self.epochs.get_mut(&e) {
            *n -= 1;
            if *n == 0 {
                self.epochs.remove(&e);
            }
        }
    }

    /// A new version of `key`, written to the reserved (pinned) block `c`, becomes the
    /// newest, dirty in the current epoch (no-overwrite write, thesis 4.1). The previous
    /// newest version is released unless it is a dirty version of an older epoch that must
    /// still be flushed (`keep_closed_epochs`, write-back flush: 4.4.2; or a flush on demand
    /// in progress waits for it, `flush_alls`).
    pub fn commit_dirty(&mut self, key: u64, c: u32, time_ns: u64, keep_closed_epochs: bool) {
        self.access(key, Op::Write, time_ns);
        let epoch = self.current_epoch;
        if let Some(old) = self.get(key) {
            let old_epoch = self.newest_epoch(key, old);
            self.unlist(key, old);
            match old_epoch {
                None => {
                    if !self.recency_policy {
                        self.replacement.remove(key);
                    }
                    self.deref_block(old);
                }
                Some(e) if e == epoch || !(keep_closed_epochs || self.flush_alls > 0) => {
                    self.dirty_remove(e, key);
                    self.dec_epoch(e);
                    self.refs[old as usize] -= 1;
                    self.deref_block(old);
                }
                Some(_) => self.deref_block(old),
            }
        }
        self.map(key, c, true);
        self.dirty_insert(epoch, key, c);
        *self.epochs.entry(epoch).or_default() += 1;
        self.refs[c as usize] += 2;
        self.touch(key);
        self.unpin(c);
    }

    /// Is (epoch, key) still the dirty version in block `c`?
    pub fn is_dirty_version(&self, epoch: u64, key: u64, c: u32) -> bool {
        self.dirty.get(&(epoch, key)) == Some(&c)
    }

    /// The oldest epoch holding dirty versions.
    pub fn oldest_dirty_epoch(&self) -> Option<u64> {
        self.epochs.first_key_value().map(|(&e, _)| e)
    }

    /// Epochs holding dirty versions, with their counts (oldest first).
    pub fn dirty_epochs(&self) -> Vec<(u64, u64)> {
        self.epochs.iter().map(|(&e, &n)| (e, n as u64)).collect()
    }

    /// Number of epochs holding dirty versions.
    pub fn dirty_epoch_count(&self) -> usize {
        self.epochs.len()
    }

    /// Number of epochs with dirty versions, counting the current one.
    pub fn open_epochs(&self) -> usize {
        self.epochs.len() + usize::from(!self.epochs.contains_key(&self.current_epoch))
    }
}
