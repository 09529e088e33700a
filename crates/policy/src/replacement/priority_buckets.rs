//! Resident blocks ordered by an integer priority, first in first out among equal
//! priorities: the state of the priority policies (LFU-DA, LRU-K, CACHEUS's CR-LFU), and
//! the one [`Replacement`] implementation LFU-DA and LRU-K share ([`ByPriority`]). (LFU, whose
//! priorities only grow by one, has constant-time buckets of its own:
//! [`FrequencyBuckets`](super::frequency_buckets::FrequencyBuckets).)
//!
//! Each block is a slab node indexed by a [`KeyMap`]; the nodes of one priority form a
//! bucket, a [`List`] whose tail is the block that entered the bucket first. The buckets in
//! use are kept in a `BTreeMap` from priority to bucket, so the lowest priority and the next
//! priority above a given one are found in `O(log b)` for `b` distinct priorities (at most
//! one per resident block). Bucket lists come from a preallocated pool; the map's own nodes
//! are the only allocation after construction (a few bytes per distinct priority).
//!
//! Blocks whose priorities are known to lie below every bucket's, and to rise in the order the
//! blocks enter, may instead wait in the *low lane*, one FIFO list outside the map (LRU-K's
//! blocks of fewer than K accesses, each of its own priority, the time it entered): entering
//! and leaving it costs no search.

use super::Replacement;
use crate::keymap::{fingerprint, Bucket, KeyMap};
use crate::slab::{List, Slab, NIL};
use std::collections::BTreeMap;

/// What a node of [`PriorityBuckets`] carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The block's priority (its bucket's).
    pub(crate) priority: u64,
    /// A per-policy count (LFU-DA's reference count).
    pub(crate) count: u32,
    /// The bucket's slot in the pool, or [`NIL`] while detached.
    bucket: u32,
}

/// Resident blocks in priority buckets (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct PriorityBuckets {
    map: KeyMap,
    slab: Slab<Meta>,
    /// The pool of bucket lists; slots of unused buckets are on `free`.
    lists: Vec<List>,
    free: Vec<u32>,
    /// Priority → bucket slot, for every non-empty bucket.
    order: BTreeMap<u64, u32>,
    /// The low lane (see the module documentation).
    lane: List,
    len: usize,
}

/// The `bucket` of a node in the low lane.
const LANE: u32 = NIL - 1;

impl PriorityBuckets {
    /// Room for `capacity` blocks.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let buckets = capacity.max(1);
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity),
            lists: vec![List::new(); buckets],
            free: (0..buckets as u32).rev().collect(),
            order: BTreeMap::new(),
            lane: List::new(),
            len: 0,
        }
    }

    /// Blocks it holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    /// Blocks it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True if it holds `capacity` blocks.
    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.slab.capacity()
    }

    /// The slot of `key` if resident, else the index bucket to insert it at.
    #[inline]
    pub(crate) fn lookup(&self, key: u64) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find(key, |s| slab.key(s))
    }

    /// [`PriorityBuckets::lookup`] with `key`'s index fingerprint already computed.
    #[inline(always)]
    pub(crate) fn lookup_fp(&self, key: u64, fp: u32) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find_fp(key, fp, |s| slab.key(s))
    }

    /// Start loading the index group of the key whose fingerprint is `fp`.
    #[inline(always)]
    pub(crate) fn prefetch_fp(&self, fp: u32) {
        self.map.prefetch_fp(fp);
    }

    /// The slot of `key`, if resident.
    #[inline]
    pub(crate) fn find(&self, key: u64) -> Option<u32> {
        self.lookup(key).ok()
    }

    /// The metadata of resident slot `i`.
    #[inline]
    pub(crate) fn meta(&self, i: u32) -> Meta {
        self.slab.node(i).meta
    }

    /// Take slot `i` out of its bucket (the bucket is dropped if it empties); the block stays
    /// indexed. [`PriorityBuckets::attach`] puts it back.
    pub(crate) fn detach(&mut self, i: u32) {
        let Meta { priority, bucket, .. } = self.slab.node(i).meta;
        if bucket == NIL {
            return;
        }
        if bucket == LANE {
            self.lane.unlink(self.slab.nodes_mut(), i);
            self.slab.node_mut(i).meta.bucket = NIL;
            return;
        }
        let list = &mut self.lists[bucket as usize];
        list.unlink(self.slab.nodes_mut(), i);
        if list.is_empty() {
            self.order.remove(&priority);
            self.free.push(bucket);
        }
        self.slab.node_mut(i).meta.bucket = NIL;
    }

    /// Put detached slot `i` at the newest end of the bucket of `priority`, with `count`.
    pub(crate) fn attach(&mut self, i: u32, priority: u64, count: u32) {
        let (free, lists) = (&mut self.free, &mut self.lists);
        let bucket = *self.order.entry(priority).or_insert_with(|| {
            // A bucket per distinct priority, each holding a block: the pool (one per block
            // of capacity) cannot run out while the slab has room.
            let b = free.pop().unwrap_or(NIL);
            debug_assert!(b != NIL, "bucket pool exhausted");
            if let Some(l) = lists.get_mut(b as usize) {
                *l = List::new();
            }
            b
        });
        self.lists[bucket as usize].push_head(self.slab.nodes_mut(), i);
        self.slab.node_mut(i).meta = Meta { priority, count, bucket };
    }

    /// Insert absent `key` (looked up into `at`) with `priority` and `count`; there must be
    /// room. Returns its slot.
    pub(crate) fn insert(&mut self, at: Bucket, key: u64, priority: u64, count: u32) -> u32 {
        let i = self.slab.alloc(key, Meta { priority, count, bucket: NIL });
        debug_assert!(i != NIL, "insert into a full PriorityBuckets");
        self.map.insert_at(at, i);
        self.attach(i, priority, count);
        self.len += 1;
        i
    }

    /// Insert absent `key` (looked up into `at`) at the newest end of the low lane, with
    /// `priority` (below every bucket's, and above every other priority in the lane) and
    /// `count`; there must be room. Returns its slot.
    pub(crate) fn insert_low(&mut self, at: Bucket, key: u64, priority: u64, count: u32) -> u32 {
        let i = self.slab.alloc(key, Meta { priority, count, bucket: LANE });
        debug_assert!(i != NIL, "insert into a full PriorityBuckets");
        self.map.insert_at(at, i);
        self.lane.push_head(self.slab.nodes_mut(), i);
        self.len += 1;
        i
    }

    /// The slot of the block that entered the low lane first, if any.
    pub(crate) fn low_oldest(&self) -> Option<u32> {
        Some(self.lane.tail).filter(|&t| t != NIL)
    }

    /// Set resident slot `i`'s count, leaving it where it is.
    pub(crate) fn set_count(&mut self, i: u32, count: u32) {
        self.slab.node_mut(i).meta.count = count;
    }

    /// Remove resident slot `i`; returns its key.
    pub(crate) fn remove(&mut self, i: u32) -> u64 {
        self.detach(i);
        let key = self.slab.key(i);
        self.map.remove(key, i);
        self.slab.release(i);
        self.len -= 1;
        key
    }

    /// The lowest priority of a resident block.
    pub(crate) fn min_priority(&self) -> Option<u64> {
        self.order.keys().next().copied()
    }

    /// True if some resident block has priority `p`.
    pub(crate) fn has_priority(&self, p: u64) -> bool {
        self.order.contains_key(&p)
    }

    /// The lowest priority of a resident block above `p` and at most `max`.
    pub(crate) fn next_priority(&self, p: u64, max: u64) -> Option<u64> {
        if max <= p {
            return None;
        }
        self.order.range(p + 1..=max).next().map(|(&q, _)| q)
    }

    /// The slot of the block that entered the bucket of priority `p` first.
    pub(crate) fn oldest(&self, p: u64) -> Option<u32> {
        let &b = self.order.get(&p)?;
        Some(self.lists[b as usize].tail).filter(|&t| t != NIL)
    }

    /// The slot of the first block `ok` accepts in the order of eviction: the low lane from
    /// the block that entered it first, then each bucket from the lowest priority, each from
    /// the block that entered it first. O(blocks and buckets passed).
    pub(crate) fn first_where(&self, ok: &mut dyn FnMut(u64) -> bool) -> Option<u32> {
        let nodes = self.slab.nodes();
        let mut walk = |mut i: u32| {
            while i != NIL {
                let n = &nodes[i as usize];
                if ok(n.key) {
                    return Some(i);
                }
                i = n.prev;
            }
            None
        };
        walk(self.lane.tail)
            .or_else(|| self.order.values().find_map(|&b| walk(self.lists[b as usize].tail)))
    }

    /// The slot of the block that entered the bucket of priority `p` last.
    pub(crate) fn newest(&self, p: u64) -> Option<u32> {
        let &b = self.order.get(&p)?;
        Some(self.lists[b as usize].head).filter(|&h| h != NIL)
    }

    /// Bytes of the index, the nodes and the bucket pool (the map of priorities, at most one
    /// entry per block, is counted at its typical 24 bytes an entry).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + self.slab.memory_bytes()
            + self.lists.len() * (std::mem::size_of::<List>() + 4)
            + self.order.len() * 24
    }
}

/// A policy whose state is [`PriorityBuckets`]: it says how a hit and an insert set a
/// block's priority (and, if it departs from the default, which block leaves), and gets its
/// [`Replacement`] from here.
pub(crate) trait ByPriority: Send {
    /// The policy's name ([`Replacement::name`]).
    const NAME: &'static str;

    /// The blocks, in their buckets.
    fn buckets(&self) -> &PriorityBuckets;

    /// The blocks, to change.
    fn buckets_mut(&mut self) -> &mut PriorityBuckets;

    /// A hit on the resident block in slot `i`: give it its new priority.
    fn hit(&mut self, i: u32);

    /// Insert `key` (not resident, room made) at `at` with its first priority.
    fn admit(&mut self, at: Bucket, key: u64);

    /// Make room in a full cache: remove a block and return its key. By default the block
    /// that entered the lowest priority's bucket first.
    fn evict(&mut self) -> Option<u64> {
        let b = self.buckets_mut();
        let v = b.min_priority().and_then(|p| b.oldest(p));
        v.map(|i| b.remove(i))
    }

    /// A block of priority `priority` was removed on request ([`Replacement::remove`]).
    fn removed(&mut self, _priority: u64) {}

    /// [`Replacement::evict_where`]: `None` (takes no shares) unless the policy says what
    /// its first victim under a filter is.
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        let _ = ok;
        None
    }

    /// Bytes of the policy's own state beside the buckets.
    fn extra_memory_bytes(&self) -> usize {
        0
    }
}

impl<P: ByPriority> Replacement for P {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn capacity(&self) -> usize {
        self.buckets().capacity()
    }

    fn len(&self) -> usize {
        self.buckets().len()
    }

    fn contains(&self, key: u64) -> bool {
        self.buckets().find(key).is_some()
    }

    fn lookup(&mut self, access: &crate::Access) -> bool {
        let Some(i) = self.buckets().find(access.key) else {
            return false;
        };
        self.hit(i);
        true
    }

    fn insert(&mut self, access: &crate::Access) -> Option<u64> {
        match self.buckets().lookup(access.key) {
            Err(at) => insert_absent(self, at, access.key),
            Ok(_) => {
                debug_assert!(false, "insert of a resident block");
                None
            }
        }
    }

    #[inline]
    fn access(&mut self, access: &crate::Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.buckets().prefetch_fp(fingerprint(key));
    }

    #[inline]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.buckets().prefetch_fp(fp);
        fp
    }

    /// The hint is the key's index fingerprint ([`Replacement::prefetch_hint`]).
    #[inline]
    fn access_hinted(&mut self, access: &crate::Access, hint: u32) -> (bool, Option<u64>) {
        match self.buckets().lookup_fp(access.key, hint) {
            Ok(i) => {
                self.hit(i);
                (true, None)
            }
            Err(at) => (false, insert_absent(self, at, access.key)),
        }
    }

    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        ByPriority::evict_where(self, ok)
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(i) = self.buckets().find(key) else {
            return false;
        };
        let priority = self.buckets().meta(i).priority;
        self.buckets_mut().remove(i);
        self.removed(priority);
        true
    }

    fn memory_bytes(&self) -> usize {
        self.buckets().memory_bytes() + self.extra_memory_bytes()
    }
}

/// Make absent `key`, looked up into `at`, resident in `p`; returns the evicted block. The
/// eviction leaves `at` valid (index entries never move).
#[inline]
fn insert_absent<P: ByPriority>(p: &mut P, at: Bucket, key: u64) -> Option<u64> {
    if p.buckets().capacity() == 0 {
        return None;
    }
    let victim = if p.buckets().is_full() { p.evict() } else { None };
    p.admit(at, key);
    victim
}
