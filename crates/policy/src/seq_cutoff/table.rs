//! One volume's stream table: the last `n` sequential streams, each as the block it expects
//! next (with its direction) and the blocks it holds so far, in an order of last use. A new
//! stream takes a free entry, or replaces the least recently continued stream (Open CAS
//! keeps its streams in an LRU list the same way). The order is a ring, so replacing the
//! least recent stream and making it the most recent is one step: the ring turns.
//!
//! The table holds its `n` entries from its first access on: the ones no stream has taken
//! yet are free, expect a tag no block has, and sit at the old end of the ring in entry
//! order, so a new stream takes the first free entry exactly as if the entries were made one
//! by one, and the least recent stream only once none is free. Index slots are a power of
//! two in number, so a slot number masked by the length is in bounds, and an entry number
//! is at most the last entry's: the compiler sees both, and the access path checks no index.
//!
//! A lookup goes to the block's slot in a small hashed index of the expected blocks. Each
//! slot holds how many entries expect a block that hashes to it and the XOR of their entry
//! numbers, both kept exact: a slot no entry hashes to answers "no stream" (a random access
//! stops there), a slot one entry hashes to names that entry, which continues the stream if
//! it expects this very block and otherwise none does, and only a slot of two or more entries
//! (a collision, or two streams expecting one block) tries the most recently continued
//! stream, then scans the entries for the first that expects it. So every answer is the
//! scan's: the index never hides a stream nor picks another entry.

use ember_trace::MAX_BLOCK_INDEX;

/// Marks a write stream in an expected-block tag (block indexes use 48 bits).
const WRITE: u64 = 1 << 63;
/// Marks a free entry's tag (`FREE | entry`): no block's tag has this bit, even one past
/// the last block, so no access continues a free entry.
const FREE: u64 = 1 << 62;

/// The last streams of one volume.
#[derive(Clone, Debug)]
pub struct StreamTable {
    /// The entries (a stream each, or free), made on the first access.
    entries: Vec<Entry>,
    /// The most recently continued entry.
    head: u32,
    /// The least recently continued entry (the head's newer neighbour in the ring): the
    /// entry the next new stream takes.
    tail: u32,
    /// Entries.
    cap: usize,
    /// The blocks the stream of the last access held before it (0: a new stream).
    held: u64,
    /// Per index slot: the entries that expect a block hashing to it (empty until the
    /// first access; a power of two of them).
    expecting: Vec<Slot>,
    /// Index slots, made on the first access.
    slots: usize,
}

/// One stream (or a free entry).
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The block (with [`WRITE`] for a write stream) that continues it.
    next: u64,
    /// Blocks the stream holds.
    len: u64,
    /// The more recently continued neighbour in the recency ring (the head's is the tail).
    newer: u32,
    /// The less recently continued neighbour (the tail's is the head).
    older: u32,
}

/// One slot of the index of expected blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// How many entries expect a block that hashes here.
    count: u32,
    /// The XOR of those entries' numbers: the entry itself when `count` is 1.
    xor: u32,
}

impl Slot {
    /// Entry `i` now expects a block that hashes here.
    fn add(&mut self, i: u32) {
        self.count += 1;
        self.xor ^= i;
    }

    /// Entry `i` no longer expects a block that hashes here.
    fn remove(&mut self, i: u32) {
        self.count -= 1;
        self.xor ^= i;
    }
}

/// The index slot of an expected-block tag among `mask + 1` (a power of two; the high half
/// of a multiplicative hash, masked).
#[inline]
fn slot(tag: u64, mask: usize) -> usize {
    (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
}

/// Entry number `i` as an index of a table whose last entry is `last`: every entry number
/// is at most `last`, so the minimum is `i` itself, and the compiler sees it in bounds (a
/// mask of a 32-bit number loses that sight).
#[inline]
fn entry(i: u32, last: usize) -> usize {
    (i as usize).min(last)
}

impl StreamTable {
    /// An empty table of `n` streams (at least 1, at most 2^31); its memory is taken on the
    /// first access.
    pub fn new(n: usize) -> Self {
        let n = n.clamp(1, 1 << 31);
        // About 16 slots an entry: a block finds its slot empty, or holding one entry, almost
        // every time (two or more in under 0.2 % of the slots while the expected blocks
        // differ), so the scan of every entry is rare.
        let slots = n.saturating_mul(16).next_power_of_two().max(64);
        Self {
            entries: Vec::new(),
            head: 0,
            tail: 0,
            cap: n,
            held: 0,
            expecting: Vec::new(),
            slots,
        }
    }

    /// Streams the table holds now.
    pub fn streams(&self) -> usize {
        self.entries.iter().filter(|e| e.next & FREE == 0).count()
    }

    /// One access to `block` (a write if `write`; block indexes are taken modulo 2^48, as in
    /// a key): continues the stream that expects it or starts a new one. Returns the blocks
    /// the stream held before this access (0 for a new stream).
    pub fn access(&mut self, block: u64, write: bool) -> u64 {
        self.record(block, write);
        self.held
    }

    /// The blocks the stream of the last access held before it ([`StreamTable::access`]'s
    /// answer).
    pub fn held(&self) -> u64 {
        self.held
    }

    /// [`StreamTable::access`] without the answer, which [`StreamTable::held`] gives. A
    /// random access (the usual hit) calls nothing: the paths that do end in their call.
    #[inline(never)]
    pub fn record(&mut self, block: u64, write: bool) {
        let tag = (block & MAX_BLOCK_INDEX) | if write { WRITE } else { 0 };
        if self.entries.is_empty() || self.expecting.is_empty() {
            return self.first_access(tag);
        }
        // The last entry and the mask of the slots (a power of two): in-bounds indexes the
        // compiler can see.
        let (em, sm) = (self.entries.len() - 1, self.expecting.len() - 1);
        let at = slot(tag, sm);
        let s = self.expecting[at];
        match s.count {
            0 => {}
            // The one entry in the slot.
            1 if self.entries[entry(s.xor, em)].next == tag => {
                return self.continue_stream(s.xor, at, tag);
            }
            1 => {}
            _ => return self.record_among_several(at, tag),
        }
        self.start(tag);
    }

    /// Entry `i`, which expects `tag` (index slot `at`), continues its stream.
    #[inline]
    fn continue_stream(&mut self, i: u32, at: usize, tag: u64) {
        let (em, sm) = (self.entries.len().wrapping_sub(1), self.expecting.len().wrapping_sub(1));
        let e = &mut self.entries[entry(i, em)];
        let next = tag.wrapping_add(1);
        self.held = e.len;
        e.len += 1;
        e.next = next;
        self.expecting[at & sm].remove(i);
        self.expecting[slot(next, sm)].add(i);
        if i != self.head {
            self.touch(i);
        }
    }

    /// A new stream that expects the block after `tag`, in the least recently continued
    /// entry (a free one while there is one), made the most recent: the ring turns by one.
    #[inline]
    fn start(&mut self, tag: u64) {
        let (em, sm) = (self.entries.len().wrapping_sub(1), self.expecting.len().wrapping_sub(1));
        let i = self.tail;
        let next = tag.wrapping_add(1);
        let e = &mut self.entries[entry(i, em)];
        let old = e.next;
        e.next = next;
        e.len = 1;
        self.tail = e.newer;
        self.head = i;
        self.held = 0;
        self.expecting[slot(old, sm)].remove(i);
        self.expecting[slot(next, sm)].add(i);
    }

    /// An access whose index slot `at` holds two or more entries: the most recently
    /// continued stream continues if it expects `tag`, else the first entry that does, else
    /// a new stream starts.
    #[inline(never)]
    fn record_among_several(&mut self, at: usize, tag: u64) {
        let head = self.head;
        let found = if self.entries.get(head as usize).is_some_and(|e| e.next == tag) {
            Some(head)
        } else {
            self.entries.iter().position(|e| e.next == tag).map(|i| i as u32)
        };
        match found {
            Some(i) => self.continue_stream(i, at, tag),
            None => self.start(tag),
        }
    }

    /// The first access: the entries are made, all free, in a ring whose oldest is entry 0,
    /// then the access starts the first stream.
    #[cold]
    #[inline(never)]
    fn first_access(&mut self, tag: u64) {
        let n = self.cap as u32;
        self.entries = (0..n)
            .map(|i| Entry {
                next: FREE | u64::from(i),
                len: 0,
                newer: if i + 1 == n { 0 } else { i + 1 },
                older: if i == 0 { n - 1 } else { i - 1 },
            })
            .collect();
        self.expecting = vec![Slot::default(); self.slots];
        let sm = self.slots - 1;
        for (i, e) in self.entries.iter().enumerate() {
            self.expecting[slot(e.next, sm)].add(i as u32);
        }
        self.tail = 0;
        self.head = n - 1;
        self.start(tag);
    }

    /// Make entry `i`, continued but not the head, the most recent.
    #[inline(never)]
    fn touch(&mut self, i: u32) {
        if self.entries.is_empty() {
            return;
        }
        let em = self.entries.len() - 1;
        let at = |j: u32| entry(j, em);
        if i == self.tail {
            // The ring turns: the tail becomes the head.
            self.tail = self.entries[at(i)].newer;
            self.head = i;
            return;
        }
        let e = self.entries[at(i)];
        // Out of the ring (it holds the head and the tail besides, so it stays closed)...
        self.entries[at(e.newer)].older = e.older;
        self.entries[at(e.older)].newer = e.newer;
        // ... and back in between the tail and the head.
        let (head, tail) = (self.head, self.tail);
        self.entries[at(i)].newer = tail;
        self.entries[at(i)].older = head;
        self.entries[at(tail)].older = i;
        self.entries[at(head)].newer = i;
        self.head = i;
    }

    /// The blocks the entries' streams expect (for tests).
    #[cfg(test)]
    pub(crate) fn next_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries.iter().map(|e| e.next).filter(|t| t & FREE == 0)
    }

    /// The index's every slot (count and entries) equals a recount from the entries (for
    /// tests).
    #[cfg(test)]
    pub(crate) fn index_is_exact(&self) -> bool {
        let mut slots = vec![Slot::default(); self.expecting.len()];
        for (i, e) in self.entries.iter().enumerate() {
            slots[slot(e.next, self.expecting.len().wrapping_sub(1))].add(i as u32);
        }
        slots == self.expecting
    }
}
