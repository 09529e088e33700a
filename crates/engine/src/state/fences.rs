//! Discard fences: the block ranges of TRIM / WRITE_ZEROES requests in progress. No block in
//! a fence is allocated (read fill, write allocation, dirty write) or flushed, so the discard
//! can pass down to backing without holding the range's stripe locks. Under ordered
//! write-back a fence carries the discard's epoch and the flusher may still write the
//! versions of older epochs in it (the discard waits for them).

/// One fence over block keys.
struct Fence {
    id: u64,
    keys: std::ops::Range<u64>,
    /// Ordered write-back: the discard's epoch; dirty versions of older epochs in the fence
    /// may still be flushed (they must reach backing before the discard). None: none may.
    epoch: Option<u64>,
}

/// The fences raised and not yet lowered (few: one per discard in flight).
#[derive(Default)]
pub(super) struct Fences {
    list: Vec<Fence>,
    next: u64,
}

impl Fences {
    /// Raise a fence over `keys` (with the discard's `epoch` under ordered write-back).
    /// Returns its id.
    pub fn raise(&mut self, keys: std::ops::Range<u64>, epoch: Option<u64>) -> u64 {
        self.next += 1;
        self.list.push(Fence { id: self.next, keys, epoch });
        self.next
    }

    /// Lower the fence `id`.
    pub fn lower(&mut self, id: u64) {
        self.list.retain(|f| f.id != id);
    }

    /// Is `key` inside a fence?
    pub fn covers(&self, key: u64) -> bool {
        self.list.iter().any(|f| f.keys.contains(&key))
    }

    /// Is any fence raised?
    pub fn covers_any(&self) -> bool {
        !self.list.is_empty()
    }

    /// Does a fence bar the flush of `key`'s version of `epoch` (a fence over it that is not
    /// an ordered fence of a later epoch)?
    pub fn bars_flush(&self, key: u64, epoch: u64) -> bool {
        self.list.iter().any(|f| f.keys.contains(&key) && f.epoch.is_none_or(|e| epoch >= e))
    }
}
