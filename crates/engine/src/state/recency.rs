//! The recency list and the free list of the cache blocks, threaded through two `u32` link
//! arrays indexed by cache block (a block is on at most one of them), with a 32-bit
//! last-access stamp per block: 12 bytes a block, no hashing and no allocation after
//! construction. When the stamps run out they are renumbered along the list (once every
//! four billion accesses), so their order stays the list's.
//!
//! The recency list holds every mapped newest version, clean or dirty, from the most recently
//! accessed (head) to the least (tail); the stamps increase from tail to head. It is the global
//! LRU order of Qin's thesis (4.4.1, 5.1): a dirty block that is flushed becomes clean where
//! it stands, at its last-access time. Eviction takes the oldest *clean* block: the walk from
//! the tail skips dirty blocks, and a cursor remembers where the last walk stopped so no dirty
//! block is skipped twice while nothing older becomes clean.
//!
//! The free list is a LIFO stack of unused blocks threaded through the `next` links.

/// The null link.
pub(super) const NIL: u32 = u32::MAX;

/// Where the search for the oldest evictable block resumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cursor {
    /// No knowledge: start at the tail.
    Tail,
    /// Every listed block older than this one is skipped (not evictable).
    At(u32),
    /// Every listed block is skipped.
    Exhausted,
}

/// The two lists of the cache blocks.
pub(super) struct Recency {
    /// Towards the head (newer), or [`NIL`].
    prev: Vec<u32>,
    /// Towards the tail (older), or [`NIL`]; on the free list, the next free block.
    next: Vec<u32>,
    /// Stamp of the block's last access (its last move to the head); increasing from tail
    /// to head.
    last: Vec<u32>,
    head: u32,
    tail: u32,
    len: usize,
    tick: u32,
    /// Renumber the stamps when `tick` reaches this (`u32::MAX`; smaller in tests).
    tick_limit: u32,
    /// Counts every change of the list or of a listed block's evictability.
    version: u64,
    cursor: Cursor,
    free: u32,
    free_len: usize,
}

impl Recency {
    /// Lists over `blocks` cache blocks, both empty.
    pub fn new(blocks: u32) -> Self {
        let n = blocks as usize;
        Self {
            prev: vec![NIL; n],
            next: vec![NIL; n],
            last: vec![0; n],
            tick_limit: u32::MAX,
            head: NIL,
            tail: NIL,
            len: 0,
            tick: 1,
            version: 0,
            cursor: Cursor::Tail,
            free: NIL,
            free_len: 0,
        }
    }

    /// Blocks on the recency list.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Changes so far: blocks listed, unlisted, moved, or made evictable. Equal versions mean
    /// the same list in the same order with the same blocks evictable.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The last-access stamp of listed block `c` (larger is more recent; only comparable
    /// between blocks listed at the same time).
    pub fn last(&self, c: u32) -> u32 {
        self.last[c as usize]
    }

    /// Renumber the stamps of the listed blocks 1, 2, ... from the tail: same order, room
    /// for four billion more.
    #[cold]
    fn renumber(&mut self) {
        let mut c = self.tail;
        let mut t = 1;
        while c != NIL {
            self.last[c as usize] = t;
            t += 1;
            c = self.prev[c as usize];
        }
        self.tick = t;
    }

    /// Put `c`, not listed, at the head (accessed now).
    pub fn push_head(&mut self, c: u32) {
        let i = c as usize;
        if self.tick >= self.tick_limit {
            self.renumber();
        }
        self.last[i] = self.tick;
        self.tick += 1;
        self.version += 1;
        self.prev[i] = NIL;
        self.next[i] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = c;
        } else {
            self.tail = c;
        }
        self.head = c;
        self.len += 1;
        if self.cursor == Cursor::Exhausted {
            // Everything older than the new head is skipped.
            self.cursor = Cursor::At(c);
        }
    }

    /// Take listed block `c` off the list.
    pub fn remove(&mut self, c: u32) {
        let i = c as usize;
        let (p, n) = (self.prev[i], self.next[i]);
        self.version += 1;
        if self.cursor == Cursor::At(c) {
            self.cursor = if p == NIL { Cursor::Exhausted } else { Cursor::At(p) };
        }
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.head = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        } else {
            self.tail = p;
        }
        self.prev[i] = NIL;
        self.next[i] = NIL;
        self.len -= 1;
    }

    /// Listed block `c` was accessed: it moves to the head.
    pub fn move_to_head(&mut self, c: u32) {
        self.remove(c);
        self.push_head(c);
    }

    /// Listed block `c` became evictable where it stands (a flushed dirty block): the next
    /// search must not pass it by.
    pub fn became_evictable(&mut self, c: u32) {
        self.version += 1;
        match self.cursor {
            Cursor::Tail => {}
            Cursor::Exhausted => self.cursor = Cursor::At(c),
            Cursor::At(x) => {
                if self.last[c as usize] < self.last[x as usize] {
                    self.cursor = Cursor::At(c);
                }
            }
        }
    }

    /// The oldest listed block for which `evictable` holds. `evictable` must be the same
    /// predicate at every call, and a block may turn evictable only through
    /// [`Recency::became_evictable`].
    pub fn oldest_where(&mut self, evictable: impl Fn(u32) -> bool) -> Option<u32> {
        let mut c = match self.cursor {
            Cursor::Tail => self.tail,
            Cursor::At(x) => x,
            Cursor::Exhausted => return None,
        };
        while c != NIL && !evictable(c) {
            c = self.prev[c as usize];
        }
        if c == NIL {
            self.cursor = Cursor::Exhausted;
            None
        } else {
            self.cursor = Cursor::At(c);
            Some(c)
        }
    }

    /// The nearest listed block newer than listed `c` for which `keep` holds.
    pub fn newer_where(&self, c: u32, keep: impl Fn(u32) -> bool) -> Option<u32> {
        let mut x = self.prev[c as usize];
        while x != NIL && !keep(x) {
            x = self.prev[x as usize];
        }
        (x != NIL).then_some(x)
    }

    /// Listed blocks, oldest first.
    pub fn oldest_first(&self) -> impl Iterator<Item = u32> + '_ {
        let mut c = self.tail;
        std::iter::from_fn(move || {
            if c == NIL {
                return None;
            }
            let out = c;
            c = self.prev[c as usize];
            Some(out)
        })
    }

    /// Push unlisted, unused block `c` on the free list.
    pub fn free_push(&mut self, c: u32) {
        self.next[c as usize] = self.free;
        self.free = c;
        self.free_len += 1;
    }

    /// Take the most recently freed block.
    pub fn free_pop(&mut self) -> Option<u32> {
        if self.free == NIL {
            return None;
        }
        let c = self.free;
        self.free = self.next[c as usize];
        self.next[c as usize] = NIL;
        self.free_len -= 1;
        Some(c)
    }

    /// Free blocks.
    pub fn free_len(&self) -> usize {
        self.free_len
    }

    /// Forget the free list (before it is rebuilt).
    pub fn free_clear(&mut self) {
        self.free = NIL;
        self.free_len = 0;
    }

    /// Renumber the stamps whenever `limit` is reached (tests: a wrap every few accesses).
    #[cfg(test)]
    pub fn set_tick_limit(&mut self, limit: u32) {
        self.tick_limit = limit;
    }

    /// Bytes the lists occupy.
    #[cfg(test)]
    pub fn memory_bytes(&self) -> usize {
        self.prev.capacity() * 4 + self.next.capacity() * 4 + self.last.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain vector model: blocks by stamp, and a set of skipped (dirty) blocks.
    #[test]
    fn oldest_where_matches_a_scan_through_random_operations() {
        for limit in [u32::MAX, 200] {
            random_operations(limit);
        }
    }

    /// With `limit`, the stamps are renumbered every few hundred accesses.
    fn random_operations(limit: u32) {
        let n = 64u32;
        let mut r = Recency::new(n);
        r.set_tick_limit(limit);
        let mut listed: Vec<u32> = Vec::new(); // oldest first
        let mut dirty = vec![false; n as usize];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rand = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut found = 0;
        for _ in 0..50_000 {
            let c = rand(u64::from(n)) as u32;
            let pos = listed.iter().position(|&b| b == c);
            match (rand(6), pos) {
                (0 | 1, None) => {
                    dirty[c as usize] = rand(3) == 0;
                    r.push_head(c);
                    listed.push(c);
                }
                (0, Some(p)) => {
                    r.remove(c);
                    listed.remove(p);
                }
                (1 | 2, Some(p)) => {
                    r.move_to_head(c);
                    listed.remove(p);
                    listed.push(c);
                }
                (3, Some(_)) if dirty[c as usize] => {
                    dirty[c as usize] = false;
                    r.became_evictable(c);
                }
                _ => {
                    let d = dirty.clone();
                    let got = r.oldest_where(|b| !d[b as usize]);
                    let want = listed.iter().copied().find(|&b| !dirty[b as usize]);
                    assert_eq!(got, want);
                    found += usize::from(got.is_some());
                }
            }
            assert_eq!(r.len(), listed.len());
            assert!(
                listed.windows(2).all(|w| r.last(w[0]) < r.last(w[1])),
                "stamps increase from tail to head"
            );
        }
        assert!(found > 1000, "the search found evictable blocks {found} times");
        assert_eq!(r.oldest_first().collect::<Vec<_>>(), listed);
    }

    #[test]
    fn the_free_list_is_last_in_first_out() {
        let mut r = Recency::new(4);
        for c in [3, 1, 2] {
            r.free_push(c);
        }
        assert_eq!(r.free_len(), 3);
        assert_eq!(
            (r.free_pop(), r.free_pop(), r.free_pop(), r.free_pop()),
            (Some(2), Some(1), Some(3), None)
        );
        assert_eq!(r.free_len(), 0);
    }
}
