//! An LRU queue cut into segments, with insertion at the keep end of any segment or at the
//! discard end of the whole queue in O(N_segs) = O(1) time (Wong and Wilkes section 5.1:
//! "inserting the block at the tail of that segment").
//!
//! The queue is one doubly-linked list through a node vector, ordered from the keep end (the
//! paper's *tail*, where LRU puts the most recently used block) to the discard end (the
//! paper's *head*, the next block to be ejected). Segment `N_segs - 1` is the run of nodes at
//! the keep end, segment 0 the run at the discard end; each node records its segment and each
//! segment its two end nodes. Segment `k >= 1` holds at most `caps[k]` blocks: when an
//! insertion overflows it, its discard-end block becomes the keep-end block of segment
//! `k - 1` — a relabelling, not a relink, because segments are contiguous — and so on down
//! to segment 0, which holds the rest. A full queue ejects from the discard end before it
//! inserts, so a block inserted at the discard end stays until the next insertion.
//!
//! This is SLRU's discipline generalised to N segments: with caps `[C - P, P]` it is the
//! probationary/protected SLRU of section 5.1 (new blocks at the keep end of segment 0, hits
//! to the keep end of segment 1, protected overflow to the probationary keep end).

mod ghosts;

use crate::keymap::KeyMap;
pub use ghosts::Ghost;
use ghosts::GhostList;

const NIL: u32 = u32::MAX;

/// Where a block goes in a [`SegmentedQueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// The keep end (the paper's tail, most recently used side) of this segment.
    Keep(usize),
    /// The discard end (the paper's head) of the whole queue: the next block to be ejected.
    Discard,
}

/// Node flag: the block is in the queue.
const IN_QUEUE: u8 = 1;

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u64,
    /// Towards the keep end.
    up: u32,
    /// Towards the discard end.
    down: u32,
    seg: u8,
    /// [`IN_QUEUE`] and the [`Ghost::flag`]s.
    flags: u8,
}

/// A block's node, found once and reused by the operations of one request. `NIL` slot: the
/// key has no node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    key: u64,
    slot: u32,
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    keep: u32,
    discard: u32,
    len: usize,
    cap: usize,
}

/// A bounded set of block keys in one LRU order cut into segments.
#[derive(Clone, Debug)]
pub struct SegmentedQueue {
    map: KeyMap,
    nodes: Vec<Node>,
    free: Vec<u32>,
    segs: Vec<Segment>,
    capacity: usize,
    len: usize,
    ghosts: [GhostList; 2],
    /// Ghost list links per node, parallel to `nodes` and empty without ghosts (so a plain
    /// queue keeps 24-byte nodes): `[prev Read, prev Demoted, next Read, next Demoted]`,
    /// prev towards the most recently used end.
    glinks: Vec<[u32; 4]>,
}

impl SegmentedQueue {
    /// An empty queue of `capacity` blocks whose segments, from the discard end, hold at most
    /// `caps[k]` blocks each (segment 0's cap is ignored: it holds the rest). `caps` must have
    /// between 1 and 255 entries.
    ///
    /// # Panics
    /// If `caps` is empty or longer than 255, or `capacity` does not fit a `u32` slot: both
    /// are configuration bugs the caller validates first
    /// ([`super::SegmentLayout::validate`]).
    pub fn new(capacity: usize, caps: &[usize]) -> Self {
        Self::with_ghosts(capacity, caps, 0)
    }

    /// As [`SegmentedQueue::new`], with two ghost LRU lists ([`Ghost::Read`],
    /// [`Ghost::Demoted`]) of `ghost_capacity` keys each sharing the queue's index and nodes,
    /// so that one hash lookup serves the queue and both ghosts.
    ///
    /// # Panics
    /// As [`SegmentedQueue::new`], or if the nodes needed exceed `u32` slots.
    pub fn with_ghosts(capacity: usize, caps: &[usize], ghost_capacity: usize) -> Self {
        assert!(!caps.is_empty() && caps.len() <= 255, "1 to 255 segments");
        let nodes = capacity.saturating_add(ghost_capacity.saturating_mul(2));
        assert!(nodes < NIL as usize, "capacity exceeds u32 slots");
        let segs =
            caps.iter().map(|&cap| Segment { keep: NIL, discard: NIL, len: 0, cap }).collect();
        let g = GhostList::new(ghost_capacity);
        Self {
            map: KeyMap::with_entries(nodes),
            nodes: Vec::with_capacity(nodes),
            free: Vec::new(),
            segs,
            capacity,
            len: 0,
            ghosts: [g, g],
            glinks: Vec::with_capacity(if ghost_capacity > 0 { nodes } else { 0 }),
        }
    }

    /// The node of `key` (one hash lookup), for [`SegmentedQueue::ghost_touch`],
    /// [`SegmentedQueue::place`] and [`SegmentedQueue::queued`].
    #[inline]
    pub fn entry(&self, key: u64) -> Entry {
        Entry { key, slot: self.find(key).unwrap_or(NIL) }
    }

    /// Start loading the index bucket of `key` into the CPU cache (a hint; no effect on
    /// state), so that a later [`SegmentedQueue::entry`] overlaps its memory latency.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// True if the entry's block is in the queue.
    #[inline]
    pub fn queued(&self, e: &Entry) -> bool {
        e.slot != NIL && self.nodes[e.slot as usize].flags & IN_QUEUE != 0
    }

    /// Hint the CPU to load node `i` (and its ghost links): the nodes at segment and ghost
    /// ends are the next ones a spill or ejection reads, and they lie anywhere in memory.
    #[inline(always)]
    fn prefetch_node(&self, i: u32) {
        if let Some(n) = self.nodes.get(i as usize) {
            crate::prefetch::prefetch(n);
        }
        if let Some(g) = self.glinks.get(i as usize) {
            crate::prefetch::prefetch(g);
        }
    }

    /// Take a node for `key`, which has none, and index it.
    #[inline]
    fn alloc(&mut self, key: u64) -> u32 {
        let node = Node { key, up: NIL, down: NIL, seg: 0, flags: 0 };
        let ghosts = self.ghosts[0].cap > 0;
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                if ghosts {
                    self.glinks[i as usize] = [NIL; 4];
                }
                i
            }
            None => {
                self.nodes.push(node);
                if ghosts {
                    self.glinks.push([NIL; 4]);
                }
                (self.nodes.len() - 1) as u32
            }
        };
        self.map.insert(key, i);
        i
    }

    /// Free node `i` if it is in neither the queue nor a ghost.
    #[inline]
    fn release_if_unused(&mut self, i: u32) {
        let n = self.nodes[i as usize];
        if n.flags == 0 {
            self.map.remove(n.key, i);
            self.free.push(i);
        }
    }

    /// Put the entry's block at `pos`: move it there if queued, otherwise insert it (first
    /// ejecting the discard-end block if full). Returns the ejected key; a queue of capacity
    /// 0 holds nothing and returns the entry's key.
    #[inline]
    pub fn place(&mut self, e: &mut Entry, pos: Position) -> Option<u64> {
        if self.queued(e) {
            self.unlink(e.slot);
            self.link(e.slot, pos);
            return None;
        }
        if self.capacity == 0 {
            return Some(e.key);
        }
        let ejected = if self.len >= self.capacity { self.eject() } else { None };
        if e.slot == NIL {
            e.slot = self.alloc(e.key);
        }
        self.nodes[e.slot as usize].flags |= IN_QUEUE;
        self.link(e.slot, pos);
        ejected
    }

    /// Maximum number of blocks.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of blocks held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no block is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of segments.
    #[inline]
    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<u32> {
        let nodes = &self.nodes;
        self.map.get(key, |s| nodes[s as usize].key)
    }

    /// True if `key` is held.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        self.queued(&self.entry(key))
    }

    /// The segment holding `key`, if held.
    pub fn segment_of(&self, key: u64) -> Option<usize> {
        let e = self.entry(key);
        self.queued(&e).then(|| self.nodes[e.slot as usize].seg as usize)
    }

    /// Blocks per segment, from the discard end.
    pub fn segment_lens(&self) -> Vec<usize> {
        self.segs.iter().map(|s| s.len).collect()
    }

    /// Keys from the keep end to the discard end (O(n); for tests and inspection).
    pub fn keys(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len);
        let top = self.segs.iter().rev().find(|s| s.len > 0).map_or(NIL, |s| s.keep);
        let mut i = top;
        while i != NIL {
            out.push(self.nodes[i as usize].key);
            i = self.nodes[i as usize].down;
        }
        out
    }

    /// Link unlinked node `i` at `pos`.
    #[inline]
    fn link(&mut self, i: u32, pos: Position) {
        let (seg, at_keep) = match pos {
            Position::Keep(k) => (k.min(self.segs.len() - 1), true),
            Position::Discard => (0, false),
        };
        // Neighbours: `up` above the new node, `down` below it.
        let (up, down) = {
            let s = self.segs[seg];
            if s.len > 0 {
                if at_keep {
                    (self.nodes[s.keep as usize].up, s.keep)
                } else {
                    (s.discard, self.nodes[s.discard as usize].down)
                }
            } else {
                // Empty segment: between the nearest non-empty segments above and below.
                let above =
                    self.segs[seg + 1..].iter().find(|s| s.len > 0).map_or(NIL, |s| s.discard);
                let below =
                    self.segs[..seg].iter().rev().find(|s| s.len > 0).map_or(NIL, |s| s.keep);
                (above, below)
            }
        };
        {
            let n = &mut self.nodes[i as usize];
            n.up = up;
            n.down = down;
            n.seg = seg as u8;
        }
        if up != NIL {
            self.nodes[up as usize].down = i;
        }
        if down != NIL {
            self.nodes[down as usize].up = i;
        }
        let s = &mut self.segs[seg];
        if s.len == 0 {
            s.keep = i;
            s.discard = i;
        } else if at_keep {
            s.keep = i;
        } else {
            s.discard = i;
        }
        s.len += 1;
        self.len += 1;
        if at_keep {
            self.spill(seg);
        }
    }

    /// Move overflow from segment `from` down towards segment 0.
    #[inline]
    fn spill(&mut self, from: usize) {
        let mut k = from;
        while k >= 1 && self.segs[k].len > self.segs[k].cap {
            let x = self.segs[k].discard;
            let s = &mut self.segs[k];
            s.len -= 1;
            if s.len == 0 {
                s.keep = NIL;
                s.discard = NIL;
            } else {
                s.discard = self.nodes[x as usize].up;
                let d = s.discard;
                self.prefetch_node(d);
            }
            let b = &mut self.segs[k - 1];
            b.keep = x;
            if b.len == 0 {
                b.discard = x;
            }
            b.len += 1;
            self.nodes[x as usize].seg = (k - 1) as u8;
            k -= 1;
        }
    }

    /// Unlink node `i` from the list and its segment.
    #[inline]
    fn unlink(&mut self, i: u32) {
        let Node { up, down, seg, .. } = self.nodes[i as usize];
        if up != NIL {
            self.nodes[up as usize].down = down;
        }
        if down != NIL {
            self.nodes[down as usize].up = up;
        }
        let s = &mut self.segs[seg as usize];
        s.len -= 1;
        if s.len == 0 {
            s.keep = NIL;
            s.discard = NIL;
        } else {
            if s.keep == i {
                s.keep = down;
            }
            if s.discard == i {
                s.discard = up;
            }
        }
        self.len -= 1;
    }

    /// Eject the block at the discard end; returns its key.
    #[inline]
    fn eject(&mut self) -> Option<u64> {
        let victim = self.segs.iter().find(|s| s.len > 0)?.discard;
        self.unlink(victim);
        let key = self.nodes[victim as usize].key;
        self.nodes[victim as usize].flags &= !IN_QUEUE;
        self.release_if_unused(victim);
        if let Some(next) = self.segs.iter().find(|s| s.len > 0) {
            self.prefetch_node(next.discard);
        }
        Some(key)
    }

    /// Insert `key`, which must not be held, at `pos`, first ejecting the discard-end block
    /// if the queue is full. Returns the ejected key. A queue of capacity 0 holds nothing and
    /// returns `key` itself.
    #[inline]
    pub fn insert(&mut self, key: u64, pos: Position) -> Option<u64> {
        let mut e = self.entry(key);
        debug_assert!(!self.queued(&e), "insert of a queued key");
        self.place(&mut e, pos)
    }

    /// Move held `key` to `pos`; returns false (and does nothing) if `key` is not held.
    #[inline]
    pub fn move_to(&mut self, key: u64, pos: Position) -> bool {
        let mut e = self.entry(key);
        if !self.queued(&e) {
            return false;
        }
        self.place(&mut e, pos);
        true
    }

    /// Remove `key`; returns whether it was held.
    pub fn remove(&mut self, key: u64) -> bool {
        let e = self.entry(key);
        if !self.queued(&e) {
            return false;
        }
        self.unlink(e.slot);
        self.nodes[e.slot as usize].flags &= !IN_QUEUE;
        self.release_if_unused(e.slot);
        true
    }

    /// Bytes of memory reserved for the index and nodes.
    pub fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + self.map.max_len() * std::mem::size_of::<Node>()
            + self.glinks.capacity() * std::mem::size_of::<[u32; 4]>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Check links, segment ends, lengths and contiguity against `keys()`.
    fn check(q: &SegmentedQueue) {
        let keys = q.keys();
        assert_eq!(keys.len(), q.len());
        let segs: Vec<usize> = keys.iter().map(|&k| q.segment_of(k).unwrap()).collect();
        assert!(segs.windows(2).all(|w| w[0] >= w[1]), "segments not contiguous: {segs:?}");
        for (k, s) in q.segs.iter().enumerate() {
            assert_eq!(segs.iter().filter(|&&x| x == k).count(), s.len, "segment {k} length");
            if k >= 1 {
                assert!(s.len <= s.cap, "segment {k} over cap");
            }
        }
    }

    #[test]
    fn single_segment_lru_and_discard_end() {
        let mut q = SegmentedQueue::new(3, &[3]);
        for k in 1..=3 {
            assert_eq!(q.insert(k, Position::Keep(0)), None);
        }
        assert_eq!(q.keys(), vec![3, 2, 1]);
        // Full: inserting at the keep end ejects the discard end.
        assert_eq!(q.insert(4, Position::Keep(0)), Some(1));
        // Inserting at the discard end ejects the old discard end first, then sits there.
        assert_eq!(q.insert(5, Position::Discard), Some(2));
        assert_eq!(q.keys(), vec![4, 3, 5]);
        assert_eq!(q.insert(6, Position::Keep(0)), Some(5));
        assert!(q.move_to(6, Position::Discard));
        assert_eq!(q.keys(), vec![4, 3, 6]);
        check(&q);
    }

    #[test]
    fn slru_probationary_and_protected() {
        // caps [_, 2]: probationary (0) and protected (1) of at most 2 blocks.
        let mut q = SegmentedQueue::new(4, &[2, 2]);
        for k in 1..=4 {
            q.insert(k, Position::Keep(0));
        }
        assert_eq!(q.segment_lens(), vec![4, 0]);
        q.move_to(1, Position::Keep(1));
        q.move_to(2, Position::Keep(1));
        q.move_to(3, Position::Keep(1)); // protected overflows: 1 drops to probationary keep end
        assert_eq!(q.keys(), vec![3, 2, 1, 4]);
        assert_eq!(q.segment_of(1), Some(0));
        assert_eq!(q.segment_lens(), vec![2, 2]);
        assert_eq!(q.insert(5, Position::Keep(0)), Some(4));
        assert_eq!(q.keys(), vec![3, 2, 5, 1]);
        check(&q);
    }

    #[test]
    fn insert_into_middle_segment_of_many() {
        let mut q = SegmentedQueue::new(6, &[2, 2, 2]);
        for k in 1..=6 {
            q.insert(k, Position::Keep(2));
        }
        assert_eq!(q.keys(), vec![6, 5, 4, 3, 2, 1]);
        assert_eq!(q.segment_lens(), vec![2, 2, 2]);
        // Middle insertion: ejects 1, lands above 4 (segment 1's keep end), 3 spills to 0.
        assert_eq!(q.insert(7, Position::Keep(1)), Some(1));
        assert_eq!(q.keys(), vec![6, 5, 7, 4, 3, 2]);
        assert_eq!(q.segment_of(7), Some(1));
        assert_eq!(q.segment_of(4), Some(1));
        assert_eq!(q.segment_of(3), Some(0));
        check(&q);
    }

    #[test]
    fn empty_segments_and_partial_fill() {
        let mut q = SegmentedQueue::new(10, &[1, 3, 3, 3]);
        q.insert(1, Position::Keep(1));
        q.insert(2, Position::Keep(3));
        q.insert(3, Position::Discard);
        q.insert(4, Position::Keep(2));
        assert_eq!(q.keys(), vec![2, 4, 1, 3]);
        check(&q);
        assert!(q.remove(4));
        assert!(!q.remove(4));
        assert_eq!(q.keys(), vec![2, 1, 3]);
        check(&q);
    }

    #[test]
    fn capacity_zero_holds_nothing() {
        let mut q = SegmentedQueue::new(0, &[0]);
        assert_eq!(q.insert(9, Position::Keep(0)), Some(9));
        assert!(q.is_empty());
        assert!(!q.contains(9));
    }

    #[test]
    fn randomized_against_a_vector_model() {
        // Model: a Vec from keep end to discard end with per-segment caps applied by the same
        // spill rule; compared after every operation.
        let caps = [3usize, 2, 4, 1, 5];
        let cap = 12;
        let mut q = SegmentedQueue::new(cap, &caps);
        let mut model: Vec<(u64, usize)> = Vec::new(); // (key, segment), keep end first
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = x % 30;
            let pos = match (x >> 8) % 7 {
                6 => Position::Discard,
                s => Position::Keep(s as usize % caps.len()),
            };
            let held = model.iter().position(|&(k, _)| k == key);
            if let Some(at) = held {
                model.remove(at);
                assert!(q.move_to(key, pos));
            } else {
                let want = if model.len() >= cap { model.pop().map(|(k, _)| k) } else { None };
                assert_eq!(q.insert(key, pos), want, "step {step}");
            }
            // Model insertion.
            match pos {
                Position::Discard => model.push((key, 0)),
                Position::Keep(s) => {
                    let at = model.iter().position(|&(_, g)| g <= s).unwrap_or(model.len());
                    model.insert(at, (key, s));
                    let mut k = s;
                    while k >= 1 {
                        let in_k: Vec<usize> =
                            (0..model.len()).filter(|&i| model[i].1 == k).collect();
                        if in_k.len() <= caps[k] {
                            break;
                        }
                        let last = in_k[in_k.len() - 1];
                        model[last].1 = k - 1;
                        k -= 1;
                    }
                }
            }
            assert_eq!(q.keys(), model.iter().map(|&(k, _)| k).collect::<Vec<_>>(), "step {step}");
            for &(k, g) in &model {
                assert_eq!(q.segment_of(k), Some(g));
            }
        }
        check(&q);
    }
}
