//! The flusher's in-flight marks: the block keys whose dirty version the flusher is writing
//! to backing now. The flusher sets them under the batch's stripe locks (and the state
//! lock), reads the versions into its buffer, releases the stripe locks for its backing
//! writes and sync, and takes the marks back when the batch ends (flushed or failed).
//!
//! A mark is *superseded* when a new dirty version of its key and of its epoch enters the
//! dirty map while it stands (a write of the same epoch committed meanwhile, which replaced
//! the version being flushed): the flusher then does not mark the key clean, whatever the
//! dirty map names, because the cache block it read may have been released and reused for
//! that very version (the flusher holds no pin across its backing I/O). A version of a later
//! epoch (write-back flush keeps the closed epoch's one) does not supersede it: the flushed
//! version is still in the dirty map, in its own block, and leaves it as usual, so a block
//! rewritten without pause cannot keep its closed epoch from ever being flushed. A request that writes
//! a block to backing directly (a write-through fallback, a write the sieve refused, TRIM /
//! WRITE_ZEROES) waits until its blocks carry no mark, so the flusher's older copy never
//! lands after it.

use std::collections::BTreeMap;

/// Keys being flushed, each with the epoch of the version being flushed and its superseded
/// flag (at most two flusher batches, one written and the next read: few).
#[derive(Default)]
pub(super) struct InFlight {
    keys: BTreeMap<u64, (u64, bool)>,
}

impl InFlight {
    /// Mark `key`'s version of `epoch` as being flushed.
    pub fn mark(&mut self, key: u64, epoch: u64) {
        self.keys.insert(key, (epoch, false));
    }

    /// A new dirty version of `key` in `epoch` was committed: if `key`'s version of that
    /// epoch is being flushed, its flush must not mark the key clean.
    pub fn supersede(&mut self, key: u64, epoch: u64) {
        if let Some((e, s)) = self.keys.get_mut(&key) {
            if *e == epoch {
                *s = true;
            }
        }
    }

    /// `key`'s flush ended; returns whether it was superseded meanwhile.
    pub fn unmark(&mut self, key: u64) -> bool {
        self.keys.remove(&key).is_some_and(|(_, s)| s)
    }

    /// Forget every mark (the flusher panicked and the engine is poisoned).
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// Is `key` being flushed?
    pub fn contains(&self, key: u64) -> bool {
        self.keys.contains_key(&key)
    }

    /// The highest key being flushed.
    pub fn highest(&self) -> Option<u64> {
        self.keys.last_key_value().map(|(&k, _)| k)
    }

    /// Is any key in `keys` being flushed?
    pub fn any_in(&self, keys: std::ops::Range<u64>) -> bool {
        keys.start < keys.end && self.keys.range(keys).next().is_some()
    }
}
