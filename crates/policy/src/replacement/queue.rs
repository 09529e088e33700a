//! A keyed queue: the hash index, the slab and one list, shared by the single-queue
//! policies (LRU, FIFO, CLOCK, SIEVE). Each policy decides what a hit does to the order and
//! which node leaves; this type only keeps index, slab and list consistent.

use crate::keymap::{Bucket, KeyMap};
use crate::slab::{List, Node, Slab, NIL};

/// Resident blocks in one list, indexed by key.
#[derive(Clone, Debug)]
pub(crate) struct Queue<M> {
    pub(crate) map: KeyMap,
    pub(crate) slab: Slab<M>,
    pub(crate) list: List,
    /// The index and nodes are larger than [`DEEP_PREFETCH_BYTES`]: worth the second stage
    /// of a prefetch ([`crate::Replacement::prefetch_resident`]), which costs instructions a
    /// cache-resident state does not repay.
    pub(crate) deep: bool,
}

/// State size above which a policy loads a resident key's node ahead, not only its index
/// group: beyond what stays in the caches closest to the core (measured: LRU over 10 M-block
/// Zipf traces gained at 1 M blocks, 32 MB, and lost at 100 K blocks, 3.2 MB).
pub(crate) const DEEP_PREFETCH_BYTES: usize = 16 << 20;

impl<M: Copy + Default> Queue<M> {
    /// A queue of at most `capacity` blocks.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let (map, slab) = (KeyMap::with_entries(capacity), Slab::with_capacity(capacity));
        let deep = map.memory_bytes() + slab.memory_bytes() > DEEP_PREFETCH_BYTES;
        Self { map, slab, list: List::new(), deep }
    }

    #[inline(always)]
    pub(crate) fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.list.len
    }

    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.list.len >= self.slab.capacity()
    }

    /// The slot of `key`, if resident.
    #[inline(always)]
    pub(crate) fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    #[inline(always)]
    pub(crate) fn node_mut(&mut self, i: u32) -> &mut Node<M> {
        self.slab.node_mut(i)
    }

    #[inline(always)]
    pub(crate) fn node(&self, i: u32) -> &Node<M> {
        self.slab.node(i)
    }

    /// The slot of `key` if resident, else the bucket to insert it at (see
    /// [`KeyMap::find`]): one probe serves both the hit and the miss.
    #[inline(always)]
    pub(crate) fn lookup(&self, key: u64) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find(key, |s| slab.key(s))
    }

    /// [`Queue::lookup`] with `key`'s index fingerprint already computed
    /// ([`crate::keymap::fingerprint`]).
    #[inline(always)]
    pub(crate) fn lookup_fp(&self, key: u64, fp: u32) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find_fp(key, fp, |s| slab.key(s))
    }

    /// Insert `key`, looked up as absent into `bucket`, at the head; the queue must not be
    /// full.
    #[inline(always)]
    pub(crate) fn push_new_at(&mut self, bucket: Bucket, key: u64, meta: M) -> u32 {
        let i = self.slab.alloc(key, meta);
        debug_assert!(i != NIL, "push_new_at on a full queue");
        self.list.push_head(self.slab.nodes_mut(), i);
        self.map.insert_at(bucket, i);
        i
    }

    /// Replace resident node `victim` by `key` (looked up as absent into `bucket`) at the
    /// head, reusing the victim's slot; returns the victim's key. The new index entry goes in
    /// first, then the victim's is removed, so the new key is not probed for twice.
    #[inline(always)]
    pub(crate) fn replace_at(&mut self, victim: u32, bucket: Bucket, key: u64, meta: M) -> u64 {
        let old = self.slab.key(victim);
        self.map.insert_at(bucket, victim);
        self.map.remove(old, victim);
        self.list.unlink(self.slab.nodes_mut(), victim);
        {
            let n = self.slab.node_mut(victim);
            n.key = key;
            n.meta = meta;
        }
        self.list.push_head(self.slab.nodes_mut(), victim);
        old
    }

    /// Start loading what the evictions after this one will read, for a policy that evicts
    /// at the tail (LRU): the index group of the key of the victim after next (whose removal
    /// from the index would otherwise wait for memory) and the node after it. A list walk
    /// cannot be prefetched further than one link per eviction, so each call reads the
    /// node the call before prefetched and prefetches one more: the next two victims' index
    /// groups and the third one's node are on their way. Changes nothing observable (a hit
    /// that moves one of them to the head only wastes its prefetch).
    ///
    /// Measured (LRU at 1 M blocks over 100 M Zipf(0.9) requests on 10 M blocks, CPU time,
    /// interleaved): 7.2 s with the tail's own group prefetched, 6.1 s with the next
    /// victim's node as well, 6.0 s like this. A walk kept up to 2-16 victims ahead, one
    /// step an access, was slower (7.0 s): its steps waited for their own loads.
    #[inline(always)]
    pub(crate) fn prefetch_tail(&self) {
        let t1 = self.list.tail;
        if t1 == NIL {
            return;
        }
        let t2 = self.slab.node(t1).prev;
        if t2 == NIL {
            return;
        }
        let n2 = self.slab.node(t2);
        self.map.prefetch(n2.key);
        if n2.prev != NIL {
            self.slab.prefetch(n2.prev);
        }
    }

    /// Move resident node `i` to the head.
    #[inline(always)]
    pub(crate) fn move_to_head(&mut self, i: u32) {
        self.list.move_to_head(self.slab.nodes_mut(), i);
    }

    /// Remove resident node `i`. Returns its key.
    #[inline]
    pub(crate) fn remove_node(&mut self, i: u32) -> u64 {
        let key = self.slab.key(i);
        self.list.unlink(self.slab.nodes_mut(), i);
        self.map.remove(key, i);
        self.slab.release(i);
        key
    }

    /// Put `key` at the head of a queue used as a bounded history, its oldest entry (the
    /// tail) leaving when full. A key already there, or a queue of no room, is left as it
    /// is. Returns the metadata of the entry that left and whether `key` went in.
    pub(crate) fn push_bounded(&mut self, key: u64, meta: M) -> (Option<M>, bool) {
        if self.capacity() == 0 {
            return (None, false);
        }
        let Err(_) = self.lookup(key) else { return (None, false) };
        let mut dropped = None;
        if self.is_full() {
            let oldest = self.list.tail;
            dropped = Some(self.node(oldest).meta);
            self.remove_node(oldest);
        }
        match self.lookup(key) {
            Err(at) => {
                self.push_new_at(at, key, meta);
                (dropped, true)
            }
            Ok(_) => (dropped, false),
        }
    }

    /// Remove the node nearest the tail whose key `ok` accepts; its key.
    pub(crate) fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<u64> {
        let mut i = self.list.tail;
        while i != NIL {
            let node = self.slab.node(i);
            let (key, prev) = (node.key, node.prev);
            if ok(key) {
                return Some(self.remove_node(i));
            }
            i = prev;
        }
        None
    }

    /// Keys from head (newest) to tail.
    pub(crate) fn keys(&self) -> Vec<u64> {
        self.list.keys(self.slab.nodes())
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.slab.memory_bytes()
    }
}
