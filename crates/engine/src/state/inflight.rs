//! The flusher's in-flight marks: the block keys whose dirty version the flusher is writing
//! to backing now. The flusher sets them under the batch's stripe locks (and the state
//! lock), releases the stripe locks for its backing writes and sync, and clears them when
//! the batch is marked clean (or failed). A request that writes a block to backing directly
//! (a write-through fallback, a write the sieve refused, TRIM / WRITE_ZEROES) waits until its
//! blocks carry no mark, so the flusher's older copy never lands after it.

use std::collections::BTreeSet;

/// Keys being flushed (at most one flusher batch: few).
#[derive(Default)]
pub(super) struct InFlight {
    keys: BTreeSet<u64>,
}

impl InFlight {
    /// Mark `key` as being flushed.
    pub fn mark(&mut self, key: u64) {
        self.keys.insert(key);
    }

    /// `key`'s flush ended.
    pub fn unmark(&mut self, key: u64) {
        self.keys.remove(&key);
    }

    /// Forget every mark (the flusher panicked and the engine is poisoned).
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// Is any key in `keys` being flushed?
    pub fn any_in(&self, keys: std::ops::Range<u64>) -> bool {
        keys.start < keys.end && self.keys.range(keys).next().is_some()
    }
}
