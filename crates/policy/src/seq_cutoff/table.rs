//! One volume's stream table: the last `n` sequential streams, each as the block it expects
//! next (with its direction) and the blocks it holds so far, in an order of last use. A new
//! stream takes a free entry, or replaces the least recently continued stream (Open CAS
//! keeps its streams in an LRU list the same way). The order is a ring, so replacing the
//! least recent stream and making it the most recent is one step: the ring turns.
//!
//! A lookup tries the most recently continued stream, which a scan continues on almost every
//! access, then the block's slot in a small hashed index of the expected blocks. Each slot
//! holds how many entries expect a block that hashes to it and the XOR of their entry
//! numbers, both kept exact: a slot no entry hashes to answers "no stream" (a random access
//! stops there), a slot one entry hashes to names that entry, which continues the stream if
//! it expects this very block and otherwise none does, and only a slot of two or more entries
//! (a collision, or two streams expecting one block) scans the entries for the first that
//! expects it. So every answer is the scan's: the index
//! never hides a stream nor picks another entry.

/// Marks a write stream in an expected-block tag (block indexes use 48 bits).
const WRITE: u64 = 1 << 63;
/// No entry (an empty table's head).
const NIL: u32 = u32::MAX;

/// The last streams of one volume.
#[derive(Clone, Debug)]
pub struct StreamTable {
    /// The streams, in the order they were made (an entry is reused in place).
    entries: Vec<Entry>,
    /// The most recently continued entry; the recency list is a ring, so the one after it
    /// towards newer entries is the least recently continued ([`NIL`]: no entry yet).
    head: u32,
    /// Entries at most.
    cap: usize,
    /// Per index slot: the entries that expect a block hashing to it.
    expecting: Vec<Slot>,
    /// The shift that maps a tag's hash to its index slot.
    shift: u32,
}

/// One stream.
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

/// The index slot of an expected-block tag (the top bits of a multiplicative hash).
fn slot(tag: u64, shift: u32) -> usize {
    (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

impl StreamTable {
    /// An empty table of `n` streams (at least 1).
    pub fn new(n: usize) -> Self {
        let n = n.max(1);
        // About 8 slots an entry: a block finds its slot empty, or holding one entry, almost
        // every time (two or more in under 1 % of the slots while the expected blocks differ).
        let slots = (n * 8).next_power_of_two().max(64);
        Self {
            entries: Vec::with_capacity(n),
            head: NIL,
            cap: n,
            expecting: vec![Slot::default(); slots],
            shift: 64 - slots.trailing_zeros(),
        }
    }

    /// Streams the table holds now.
    pub fn streams(&self) -> usize {
        self.entries.len()
    }

    /// One access to `block` (a write if `write`): continues the stream that expects it or
    /// starts a new one. Returns the blocks the stream held before this access (0 for a new
    /// stream).
    pub fn access(&mut self, block: u64, write: bool) -> u64 {
        let tag = block | if write { WRITE } else { 0 };
        let head = self.head as usize;
        let found = if self.entries.get(head).is_some_and(|e| e.next == tag) {
            Some(head)
        } else {
            let at = self.expecting[slot(tag, self.shift)];
            match at.count {
                0 => None,
                1 => Some(at.xor as usize).filter(|&i| self.entries[i].next == tag),
                _ => self.entries.iter().position(|e| e.next == tag),
            }
        };
        match found {
            Some(i) => {
                let before = self.entries[i].len;
                self.entries[i].len = before + 1;
                self.set_expected(i, tag.wrapping_add(1));
                self.touch(i as u32);
                before
            }
            None => {
                let i = self.take();
                self.set_expected(i, tag.wrapping_add(1));
                self.entries[i].len = 1;
                0
            }
        }
    }

    /// Entry `i` now expects `tag` (the index follows).
    fn set_expected(&mut self, i: usize, tag: u64) {
        let shift = self.shift;
        let e = &mut self.entries[i];
        self.expecting[slot(e.next, shift)].remove(i as u32);
        self.expecting[slot(tag, shift)].add(i as u32);
        e.next = tag;
    }

    /// The blocks the entries expect (for tests).
    #[cfg(test)]
    pub(crate) fn next_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries.iter().map(|e| e.next)
    }

    /// The index's every slot (count and entries) equals a recount from the entries (for
    /// tests).
    #[cfg(test)]
    pub(crate) fn index_is_exact(&self) -> bool {
        let mut slots = vec![Slot::default(); self.expecting.len()];
        for (i, e) in self.entries.iter().enumerate() {
            slots[slot(e.next, self.shift)].add(i as u32);
        }
        slots == self.expecting
    }

    /// The entry for a new stream, made the most recent: a free one, or the least recently
    /// continued one (the ring turns by one: the tail becomes the head).
    fn take(&mut self) -> usize {
        let n = self.entries.len();
        if n < self.cap {
            let i = n as u32;
            let mut e = Entry { next: 0, len: 0, newer: i, older: i };
            if let Some(h) = self.entries.get(self.head as usize).copied() {
                // Between the tail (the head's newer) and the head.
                e = Entry { newer: h.newer, older: self.head, ..e };
                self.entries[h.newer as usize].older = i;
                self.entries[self.head as usize].newer = i;
            }
            self.entries.push(e);
            self.expecting[slot(0, self.shift)].add(i);
            self.head = i;
            n
        } else {
            self.head = self.entries[self.head as usize].newer;
            self.head as usize
        }
    }

    /// Make entry `i` the most recent.
    fn touch(&mut self, i: u32) {
        if self.head == i {
            return;
        }
        let e = self.entries[i as usize];
        // Out of the ring (it holds the head besides, so it stays closed)...
        self.entries[e.newer as usize].older = e.older;
        self.entries[e.older as usize].newer = e.newer;
        // ... and back in between the tail and the head.
        let head = self.head;
        let tail = self.entries[head as usize].newer;
        self.entries[i as usize].newer = tail;
        self.entries[i as usize].older = head;
        self.entries[tail as usize].older = i;
        self.entries[head as usize].newer = i;
        self.head = i;
    }
}
