//! One volume's stream table: the last `n` sequential streams, each as the block it expects
//! next (with its direction) and the blocks it holds so far, in an order of last use. A new
//! stream takes a free entry, or replaces the least recently continued stream (Open CAS
//! keeps its streams in an LRU list the same way).
//!
//! A lookup tries the most recently continued stream, which a scan continues on almost every
//! access, then asks a small counting filter whether any entry expects the block (a random
//! access, which continues no stream, stops there), and only then scans the expected blocks
//! (a flat array, `n` words). The filter counts exactly, so it never hides a stream: the
//! decisions are those of the scan alone.

/// Marks a write stream in an expected-block tag (block indexes use 48 bits).
const WRITE: u64 = 1 << 63;
/// No entry (end of the recency list).
const NIL: u32 = u32::MAX;

/// The last streams of one volume.
#[derive(Clone, Debug)]
pub struct StreamTable {
    /// Per entry: the block (with [`WRITE`] for a write stream) that continues it.
    next: Vec<u64>,
    /// Per entry: blocks the stream holds.
    len: Vec<u64>,
    /// Recency list, most recent first: per entry the more and the less recent neighbour.
    newer: Vec<u32>,
    older: Vec<u32>,
    head: u32,
    tail: u32,
    /// Entries at most.
    cap: usize,
    /// Per filter slot: how many entries expect a block that hashes to it.
    expecting: Vec<u16>,
    /// The shift that maps a tag's hash to its filter slot.
    shift: u32,
}

/// The filter slot of an expected-block tag (the top bits of a multiplicative hash).
fn slot(tag: u64, shift: u32) -> usize {
    (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

impl StreamTable {
    /// An empty table of `n` streams (at least 1).
    pub fn new(n: usize) -> Self {
        let n = n.max(1);
        // About 16 slots an entry: a block no stream expects finds its slot empty most times.
        let slots = (n * 16).next_power_of_two().max(64);
        Self {
            next: Vec::with_capacity(n),
            len: Vec::with_capacity(n),
            newer: Vec::with_capacity(n),
            older: Vec::with_capacity(n),
            head: NIL,
            tail: NIL,
            cap: n,
            expecting: vec![0; slots],
            shift: 64 - slots.trailing_zeros(),
        }
    }

    /// Streams the table holds now.
    pub fn streams(&self) -> usize {
        self.next.len()
    }

    /// One access to `block` (a write if `write`): continues the stream that expects it or
    /// starts a new one. Returns the blocks the stream held before this access (0 for a new
    /// stream).
    pub fn access(&mut self, block: u64, write: bool) -> u64 {
        let tag = block | if write { WRITE } else { 0 };
        let found = if self.head != NIL && self.next[self.head as usize] == tag {
            Some(self.head as usize)
        } else if self.expecting[slot(tag, self.shift)] == 0 {
            None
        } else {
            self.next.iter().position(|&t| t == tag)
        };
        match found {
            Some(i) => {
                let before = self.len[i];
                self.len[i] = before + 1;
                self.set_expected(i, tag.wrapping_add(1));
                self.touch(i as u32);
                before
            }
            None => {
                let i = self.take();
                self.set_expected(i as usize, tag.wrapping_add(1));
                self.len[i as usize] = 1;
                self.touch(i);
                0
            }
        }
    }

    /// Entry `i` now expects `tag` (the filter's counts follow).
    fn set_expected(&mut self, i: usize, tag: u64) {
        let shift = self.shift;
        self.expecting[slot(self.next[i], shift)] -= 1;
        self.expecting[slot(tag, shift)] += 1;
        self.next[i] = tag;
    }

    /// The blocks the entries expect (for tests).
    #[cfg(test)]
    pub(crate) fn next_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.next.iter().copied()
    }

    /// The filter's count of every slot, recounted from the entries (for tests).
    #[cfg(test)]
    pub(crate) fn filter_is_exact(&self) -> bool {
        let mut counts = vec![0u16; self.expecting.len()];
        for &t in &self.next {
            counts[slot(t, self.shift)] += 1;
        }
        counts == self.expecting
    }

    /// An entry for a new stream: a free one, or the least recently continued one.
    fn take(&mut self) -> u32 {
        if self.next.len() < self.cap {
            let i = self.next.len() as u32;
            self.next.push(0);
            self.expecting[slot(0, self.shift)] += 1;
            self.len.push(0);
            self.newer.push(NIL);
            self.older.push(NIL);
            i
        } else {
            self.tail
        }
    }

    /// Make entry `i` the most recent (linking it in if it is new).
    fn touch(&mut self, i: u32) {
        if self.head == i {
            return;
        }
        let iu = i as usize;
        let (newer, older) = (self.newer[iu], self.older[iu]);
        let linked = newer != NIL || older != NIL || self.tail == i;
        if linked {
            if newer != NIL {
                self.older[newer as usize] = older;
            }
            if older != NIL {
                self.newer[older as usize] = newer;
            } else {
                self.tail = newer;
            }
        }
        self.newer[iu] = NIL;
        self.older[iu] = self.head;
        if self.head != NIL {
            self.newer[self.head as usize] = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }
}
