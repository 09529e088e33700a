//! Replacement orders: which resident block to evict when room is needed.
//!
//! Every policy implements [`Replacement`] over uniform-size blocks with a capacity counted in
//! blocks, so the simulator and the engine can use any of them.

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

    /// Lookup and, on a miss, insert: the common path when every miss is allocated.
    /// Returns (hit, evicted block).
    fn access(&mut self, access: &crate::Access) -> (bool, Option<u64>) {
        if self.lookup(access) {
            (true, None)
        } else {
            (false, self.insert(access))
        }
    }
}
