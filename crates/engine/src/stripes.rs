//! The striped lock table: a request holds the locks of every block it touches for the whole
//! of its I/O, so two requests on one block never interleave (a read-miss fill cannot install
//! data older than a write that raced it; a TRIM cannot slip between a fill's backing read and
//! its cache write). Locks are taken in ascending stripe order, so requests never deadlock.

use parking_lot::{Mutex, MutexGuard};
use std::ops::Range;

/// Number of stripes (a power of two).
pub const STRIPES: usize = 1024;

/// The lock table.
pub(crate) struct Stripes {
    locks: Vec<Mutex<()>>,
}

/// Locks held for one request (released on drop).
pub(crate) struct Held<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Stripes {
    pub fn new() -> Self {
        Self { locks: (0..STRIPES).map(|_| Mutex::new(())).collect() }
    }

    /// Stripe of a volume block: consecutive blocks land on consecutive stripes.
    fn index(volume: u32, block: u64) -> usize {
        (block.wrapping_add((volume as u64).wrapping_mul(0x9E37_79B9)) as usize) & (STRIPES - 1)
    }

    /// Lock every stripe covering `blocks` of `volume`, in ascending order.
    pub fn lock(&self, volume: u32, blocks: Range<u64>) -> Held<'_> {
        let n = blocks.end.saturating_sub(blocks.start);
        let mut idx: Vec<usize> = if n >= STRIPES as u64 {
            (0..STRIPES).collect()
        } else {
            let mut v: Vec<usize> = blocks.map(|b| Self::index(volume, b)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        idx.shrink_to_fit();
        Held { _guards: idx.into_iter().map(|i| self.locks[i].lock()).collect() }
    }

    /// Lock the stripes of arbitrary (volume, block) pairs, in ascending stripe order (the
    /// flusher's batches).
    pub fn lock_keys(&self, keys: impl Iterator<Item = (u32, u64)>) -> Held<'_> {
        let mut idx: Vec<usize> = keys.map(|(v, b)| Self::index(v, b)).collect();
        idx.sort_unstable();
        idx.dedup();
        Held { _guards: idx.into_iter().map(|i| self.locks[i].lock()).collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn overlapping_ranges_exclude_each_other_and_never_deadlock() {
        let s = Arc::new(Stripes::new());
        let inside = Arc::new(AtomicU64::new(0));
        let max_seen = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (s, inside, max_seen) = (s.clone(), inside.clone(), max_seen.clone());
                std::thread::spawn(move || {
                    for i in 0..300u64 {
                        // Ranges that all cover block 2000 but start in different places,
                        // some wrapping the table, one covering all of it.
                        let start = 2000 - (i * 7 + t * 13) % 1500;
                        let len = if i % 50 == 0 { 5000 } else { 2001 - start + i % 9 };
                        let _h = s.lock(0, start..start + len);
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        max_seen.fetch_max(now, Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(max_seen.load(Ordering::SeqCst), 1, "block 2000 was held by one at a time");
    }
}
