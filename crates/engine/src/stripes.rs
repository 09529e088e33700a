//! The striped lock table: a request holds the locks of every block it touches for the whole
//! of its I/O, so two requests on one block never interleave (a read-miss fill cannot install
//! data older than a write that raced it; a TRIM cannot slip between a fill's backing read and
//! its cache write). Locks are taken in ascending stripe order, so requests never deadlock.

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

/// Largest number of blocks one chunk of a request covers: the blocks whose locks it holds
/// at once (a request's, a preload run's).
pub const CHUNK_BLOCKS: u64 = 64;

/// Number of stripes (a power of two).
pub const STRIPES: usize = 1024;

/// The lock table, and its poison flag: like a std mutex, the table is poisoned when a
/// thread panics while holding stripe locks (or inside a request, see `io::ctx`). A panic can
/// leave a cache block mapped but never filled, or a backing write done without the cache
/// update that goes with it; so from then on every lock attempt fails and the engine serves
/// nothing more. The next start is cold.
pub(crate) struct Stripes {
    locks: Vec<Mutex<()>>,
    poisoned: AtomicBool,
}

/// Stripe indices or guards kept inline (no heap allocation) up to this many: a request of
/// a few blocks, the hit path's common case.
const INLINE: usize = 8;

/// Locks held for one request (released on drop).
pub(crate) struct Held<'a> {
    guards: SmallVec<[MutexGuard<'a, ()>; INLINE]>,
    poisoned: &'a AtomicBool,
}

impl Drop for Held<'_> {
    /// An unwind through held locks poisons the table before they are released, so no other
    /// request can see what the panicking one left half done.
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.poisoned.store(true, Ordering::SeqCst);
        }
        self.guards.clear();
    }
}

/// The error every request gets once the engine is poisoned.
pub(crate) fn poisoned_error() -> io::Error {
    io::Error::other(
        "ember stopped serving: a request panicked (see the log), so cached data may be \
         incomplete; restart ember (the cache starts cold)",
    )
}

impl Stripes {
    pub fn new() -> Self {
        Self {
            locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Mark the table poisoned (a panic inside a request or the flusher).
    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::SeqCst);
    }

    /// Has a panic poisoned the table?
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// Stripe of a volume block: consecutive blocks land on consecutive stripes.
    fn index(volume: u32, block: u64) -> usize {
        (block.wrapping_add((volume as u64).wrapping_mul(0x9E37_79B9)) as usize) & (STRIPES - 1)
    }

    /// The distinct stripes covering `blocks` of `volume`, ascending. Consecutive blocks
    /// land on consecutive stripes, so fewer than [`STRIPES`] blocks cover as many distinct
    /// stripes, one run that may wrap past the last stripe: ascending, the wrapped part
    /// comes first. Built with plain pushes (no sort, no collect): this runs on every request.
    fn covering(volume: u32, blocks: Range<u64>) -> SmallVec<[usize; INLINE]> {
        let n = blocks.end.saturating_sub(blocks.start);
        let mut v = SmallVec::new();
        if n >= STRIPES as u64 {
            for i in 0..STRIPES {
                v.push(i);
            }
            return v;
        }
        let first = Self::index(volume, blocks.start);
        let end = first + n as usize;
        for i in 0..end.saturating_sub(STRIPES) {
            v.push(i);
        }
        for i in first..end.min(STRIPES) {
            v.push(i);
        }
        v
    }

    fn take(&self, idx: impl IntoIterator<Item = usize>) -> io::Result<Held<'_>> {
        let mut held = Held { guards: SmallVec::new(), poisoned: &self.poisoned };
        for i in idx {
            held.guards.push(self.locks[i].lock());
        }
        if self.is_poisoned() {
            return Err(poisoned_error());
        }
        Ok(held)
    }

    /// Lock every stripe covering `blocks` of `volume`, in ascending order; fails once the
    /// table is poisoned.
    pub fn lock(&self, volume: u32, blocks: Range<u64>) -> io::Result<Held<'_>> {
        self.take(Self::covering(volume, blocks))
    }

    /// Lock every stripe covering `blocks` of `volume` if none is taken now; `None` (nothing
    /// held) if one is, or once the table is poisoned. For a request served on a thread that
    /// must not wait (a degraded read answered on the connection's reader).
    pub fn try_lock(&self, volume: u32, blocks: Range<u64>) -> Option<Held<'_>> {
        let mut held = Held { guards: SmallVec::new(), poisoned: &self.poisoned };
        for i in Self::covering(volume, blocks) {
            held.guards.push(self.locks[i].try_lock()?);
        }
        (!self.is_poisoned()).then_some(held)
    }

    /// Lock the stripes of arbitrary (volume, block) pairs, in ascending stripe order (the
    /// flusher's batches); fails once the table is poisoned.
    pub fn lock_keys(&self, keys: impl Iterator<Item = (u32, u64)>) -> io::Result<Held<'_>> {
        let mut idx: Vec<usize> = keys.map(|(v, b)| Self::index(v, b)).collect();
        idx.sort_unstable();
        idx.dedup();
        self.take(idx)
    }

    /// Lock the stripes of arbitrary (volume, block) pairs without waiting (the flusher,
    /// while it holds in-flight marks that a request holding one of these stripes may be
    /// waiting for): `None`, with nothing held, if any of them is taken; an error once the
    /// table is poisoned.
    pub fn try_lock_keys(
        &self,
        keys: impl Iterator<Item = (u32, u64)>,
    ) -> Option<io::Result<Held<'_>>> {
        let mut idx: Vec<usize> = keys.map(|(v, b)| Self::index(v, b)).collect();
        idx.sort_unstable();
        idx.dedup();
        let mut held = Held { guards: SmallVec::new(), poisoned: &self.poisoned };
        for i in idx {
            held.guards.push(self.locks[i].try_lock()?);
        }
        if self.is_poisoned() {
            return Some(Err(poisoned_error()));
        }
        Some(Ok(held))
    }

    /// Try to lock the stripes of `keys` without waiting (a hit read whose locks stay held
    /// across the reader's loop, `io/read_hits.rs`: the reader may already hold some of them
    /// for an earlier request, so waiting could deadlock it). The stripe indices held, or
    /// `None` with nothing held if any is taken (or the table is poisoned). Release with
    /// [`Stripes::unlock_raw`] on the same thread.
    pub fn try_lock_raw(
        &self,
        keys: impl Iterator<Item = (u32, u64)>,
    ) -> Option<SmallVec<[usize; INLINE]>> {
        let mut idx: SmallVec<[usize; INLINE]> = keys.map(|(v, b)| Self::index(v, b)).collect();
        idx.sort_unstable();
        idx.dedup();
        for (k, &i) in idx.iter().enumerate() {
            match self.locks[i].try_lock() {
                Some(guard) => std::mem::forget(guard),
                None => {
                    // SAFETY: each of these was locked just above by this thread, its guard
                    // forgotten.
                    idx[..k].iter().for_each(|&j| unsafe { self.locks[j].force_unlock() });
                    return None;
                }
            }
        }
        if self.is_poisoned() {
            // SAFETY: as above.
            idx.iter().for_each(|&j| unsafe { self.locks[j].force_unlock() });
            return None;
        }
        Some(idx)
    }

    /// Release stripes taken by [`Stripes::try_lock_raw`].
    ///
    /// # Safety
    ///
    /// `idx` must be what [`Stripes::try_lock_raw`] returned on this thread, released once.
    pub unsafe fn unlock_raw(&self, idx: &[usize]) {
        for &i in idx {
            // SAFETY: locked by try_lock_raw on this thread, per the caller's contract.
            unsafe { self.locks[i].force_unlock() };
        }
    }

    /// Take and release, one at a time, every stripe covering `blocks` of `volume`: when
    /// this returns, every request that held one of them when the call began has finished.
    /// Never holds more than one stripe, so it blocks no request for longer than that
    /// request's own turn (a TRIM's wait for requests older than its fence).
    pub fn wait_range(&self, volume: u32, blocks: Range<u64>) -> io::Result<()> {
        for i in Self::covering(volume, blocks) {
            drop(self.locks[i].lock());
        }
        if self.is_poisoned() {
            return Err(poisoned_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// The stripes of a range are those of its blocks, distinct and ascending, wrapping or
    /// not, for every length up to past the whole table.
    #[test]
    fn covering_is_the_sorted_distinct_stripes_of_the_blocks() {
        for volume in [0u32, 1, 7] {
            for start in [0u64, 1, 1000, 1020, 1023, 5000, u64::MAX / 2] {
                for n in [0u64, 1, 2, 3, 8, 9, 64, 1023, 1024, 1025, 3000] {
                    let blocks = start..start + n;
                    let mut want: Vec<usize> =
                        blocks.clone().map(|b| Stripes::index(volume, b)).collect();
                    want.sort_unstable();
                    want.dedup();
                    let got = Stripes::covering(volume, blocks);
                    assert_eq!(&got[..], &want[..], "volume {volume} blocks {start}+{n}");
                }
            }
        }
    }

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
                        let _h = s.lock(0, start..start + len).unwrap();
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
