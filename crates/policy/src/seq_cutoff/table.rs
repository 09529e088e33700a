//! One volume's stream table: the last `n` sequential streams, each as the block it expects
//! next (with its direction) and the blocks it holds so far, in an order of last use. A new
//! stream takes a free entry, or replaces the least recently continued stream (Open CAS
//! keeps its streams in an LRU list the same way).
//!
//! A lookup scans the expected blocks (a flat array, `n` words) after trying the most
//! recently continued stream, which a scan continues on almost every access.

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
}

impl StreamTable {
    /// An empty table of `n` streams (at least 1).
    pub fn new(n: usize) -> Self {
        let n = n.max(1);
        Self {
            next: Vec::with_capacity(n),
            len: Vec::with_capacity(n),
            newer: Vec::with_capacity(n),
            older: Vec::with_capacity(n),
            head: NIL,
            tail: NIL,
            cap: n,
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
        } else {
            self.next.iter().position(|&t| t == tag)
        };
        match found {
            Some(i) => {
                let before = self.len[i];
                self.len[i] = before + 1;
                self.next[i] = tag.wrapping_add(1);
                self.touch(i as u32);
                before
            }
            None => {
                let i = self.take();
                self.next[i as usize] = tag.wrapping_add(1);
                self.len[i as usize] = 1;
                self.touch(i);
                0
            }
        }
    }

    /// An entry for a new stream: a free one, or the least recently continued one.
    fn take(&mut self) -> u32 {
        if self.next.len() < self.cap {
            let i = self.next.len() as u32;
            self.next.push(0);
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
