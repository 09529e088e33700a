//! The stale rule of DEMOTE with several clients (docs/design/architecture.md, "The stale
//! rule").
//!
//! A DEMOTE carries a client's clean copy of a block. If another client wrote the block after
//! that copy was read, storing it would make the array serve old data. The array knows every
//! write it acknowledged, so it keeps:
//!
//! - per volume ([`StaleGuard`]): a sequence number advanced when a write (WRITE, TRIM,
//!   WRITE_ZEROES) to the volume completes, the sequence number of the last completed write
//!   of every written block, and the blocks a write is still in progress on;
//! - per connection ([`Session`]): for every block the connection got a copy of, the
//!   sequence number when it got it: a READ takes the number at its start (so a write that
//!   completes while the READ runs makes the copy suspect), the connection's own WRITE the
//!   number its completion made (the client's cache holds what it wrote).
//!
//! A DEMOTE of a block is kept only if its connection has a copy of it, no write of it is in
//! progress, and no write of it completed after the copy was taken; otherwise it is refused
//! as stale (counted) and the array keeps what it had. The check runs under the block's
//! stripe lock, so a write cannot slip between it and the store; a write that starts after
//! the store finds the block cached and overwrites it there too. Unknown means refused: a
//! connection's copies are forgotten when it closes, and a DEMOTE consumes its copy.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// At most this many remembered copies per connection; beyond it the oldest half is
/// forgotten (their DEMOTEs are then refused, which is safe).
const MAX_COPIES: usize = 1 << 22;

/// At most this many written blocks a volume remembers the last write of; beyond it the
/// older half is forgotten and the guard's floor rises past them (a copy older than the floor
/// is then refused unless the block's last write is still remembered, which is safe).
const MAX_WRITES: usize = 1 << 22;

/// The writes a volume acknowledged, for the stale rule.
pub struct StaleGuard {
    seq: AtomicU64,
    state: Mutex<Writes>,
    /// Most blocks remembered in [`Writes::last`].
    max_writes: usize,
}

#[derive(Default)]
struct Writes {
    /// Block → sequence number of its last completed write.
    last: HashMap<u64, u64>,
    /// Block → writes in progress.
    running: HashMap<u64, u32>,
    /// Every forgotten write had a sequence number at most this: a copy taken before it may
    /// predate a write no longer in `last`.
    floor: u64,
}

impl StaleGuard {
    /// A guard that has seen no write.
    pub fn new() -> Arc<Self> {
        Self::with_max_writes(MAX_WRITES)
    }

    /// A guard that remembers the last writes of at most `max_writes` blocks.
    pub fn with_max_writes(max_writes: usize) -> Arc<Self> {
        Arc::new(Self {
            seq: AtomicU64::new(0),
            state: Mutex::new(Writes::default()),
            max_writes: max_writes.max(2),
        })
    }

    /// Blocks whose last write is remembered.
    pub fn remembered_writes(&self) -> usize {
        self.state.lock().last.len()
    }

    /// A write of `blocks` starts.
    pub fn write_started(&self, blocks: std::ops::Range<u64>) {
        let mut st = self.state.lock();
        for b in blocks {
            *st.running.entry(b).or_insert(0) += 1;
        }
    }

    /// The write of `blocks` started with [`StaleGuard::write_started`] completed (or
    /// failed: the block may have changed either way). Returns its sequence number.
    pub fn write_done(&self, blocks: std::ops::Range<u64>) -> u64 {
        let mut st = self.state.lock();
        let s = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        if st.last.len() + (blocks.end - blocks.start) as usize > self.max_writes {
            // Forget the older half; the floor says which copies can no longer be judged.
            let mut seqs: Vec<u64> = st.last.values().copied().collect();
            seqs.sort_unstable();
            let cut = seqs[seqs.len() / 2];
            st.last.retain(|_, &mut w| w > cut);
            st.floor = st.floor.max(cut);
        }
        for b in blocks {
            st.last.insert(b, s);
            if let Some(n) = st.running.get_mut(&b) {
                *n -= 1;
                if *n == 0 {
                    st.running.remove(&b);
                }
            }
        }
        s
    }

    /// The sequence number now (a READ takes it at its start).
    pub fn now(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Whether a copy of `block` taken at sequence number `copy` is still the newest data.
    pub fn fresh(&self, block: u64, copy: u64) -> bool {
        let st = self.state.lock();
        if st.running.contains_key(&block) {
            return false;
        }
        match st.last.get(&block) {
            Some(&w) => w <= copy,
            // Never written, or its last write forgotten: fresh only if the copy is not older
            // than every forgotten write.
            None => copy >= st.floor,
        }
    }
}

/// One connection's copies of blocks.
pub struct Session {
    guard: Arc<StaleGuard>,
    copies: Mutex<HashMap<u64, u64>>,
}

impl Session {
    /// A connection to the volume `guard` watches.
    pub fn new(guard: Arc<StaleGuard>) -> Self {
        Self { guard, copies: Mutex::new(HashMap::new()) }
    }

    /// The volume's guard.
    pub fn guard(&self) -> &StaleGuard {
        &self.guard
    }

    /// The connection got a copy of `blocks` as of sequence number `seq`.
    pub fn copied(&self, blocks: std::ops::Range<u64>, seq: u64) {
        let mut c = self.copies.lock();
        if c.len() + (blocks.end - blocks.start) as usize > MAX_COPIES {
            let mut seqs: Vec<u64> = c.values().copied().collect();
            seqs.sort_unstable();
            let cut = seqs[seqs.len() / 2];
            c.retain(|_, &mut s| s > cut);
        }
        for b in blocks {
            c.insert(b, seq);
        }
    }

    /// The connection's own copy of `blocks` is gone (its TRIM: the client dropped it).
    pub fn forget(&self, blocks: std::ops::Range<u64>) {
        let mut c = self.copies.lock();
        for b in blocks {
            c.remove(&b);
        }
    }

    /// A DEMOTE of `block`: true if its copy may be kept. Consumes the copy either way.
    pub fn demote_fresh(&self, block: u64) -> bool {
        let copy = self.copies.lock().remove(&block);
        copy.is_some_and(|s| self.guard.fresh(block, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_of_last_writes_is_bounded_and_forgetting_refuses_old_copies() {
        let g = StaleGuard::with_max_writes(8);
        let a = Session::new(g.clone());
        a.copied(0..1, g.now());
        for b in 0..100 {
            g.write_done(b..b + 1);
            assert!(g.remembered_writes() <= 8, "{} remembered", g.remembered_writes());
        }
        // Block 0's write is forgotten; A's copy predates it, so it must still be refused.
        assert!(!a.demote_fresh(0), "a copy older than a forgotten write");
        // A copy taken now is fresh for a block never written (or written long ago).
        a.copied(1000..1001, g.now());
        assert!(a.demote_fresh(1000));
        a.copied(99..100, g.now());
        assert!(a.demote_fresh(99), "a READ after the remembered last write");
    }

    #[test]
    fn a_write_after_the_copy_makes_it_stale() {
        let g = StaleGuard::new();
        let (a, b) = (Session::new(g.clone()), Session::new(g.clone()));
        a.copied(5..6, g.now());
        a.copied(6..7, g.now());
        g.write_started(5..6);
        assert!(!a.demote_fresh(5), "a write in progress");
        a.copied(5..6, g.now());
        let s = g.write_done(5..6);
        b.copied(5..6, s);
        assert!(!a.demote_fresh(5), "A's copy predates B's write");
        assert!(b.demote_fresh(5), "B's copy is what it wrote");
        assert!(a.demote_fresh(6), "block 6 was never written");
        assert!(!a.demote_fresh(6), "a DEMOTE consumes the copy");
        a.copied(5..6, g.now());
        assert!(a.demote_fresh(5), "a READ after the write is fresh");
        assert!(!b.demote_fresh(9), "no copy, no DEMOTE");
    }
}
