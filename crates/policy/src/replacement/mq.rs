//! MQ, the Multi-Queue replacement algorithm for second-level buffer caches (Zhou, Philbin
//! & Li, "The Multi-Queue replacement algorithm for second level buffer caches", USENIX ATC
//! 2001, section 4; designed for the storage array below a client's own cache).
//!
//! `m` LRU queues `Q0..Q(m-1)` (`queues`, default 8): a block accessed `f` times lives in
//! `Q(min(log2 f, m-1))`, at the MRU end after each access, with `expireTime = now +
//! lifeTime` (`lifetime` accesses, default 10 000). After each access `Adjust` advances
//! `now` and moves the LRU block of each queue `Qk` (`k >= 1`) whose expiry has passed to
//! the MRU end of `Q(k-1)`, with a new expiry. A miss evicts the LRU block of the lowest
//! non-empty queue and remembers its key and count in the FIFO history `Qout` (`qout`
//! times the capacity, default 4); a block found in `Qout` comes back with its count plus
//! one, any other with one. The paper's lifeTime adapts to the observed temporal distance;
//! here, as in libCacheSim, it is a parameter.
//!
//! Order of a miss: the paper evicts (adding the victim to `Qout`) and then looks the block
//! up in `Qout`; libCacheSim's `MQ` looks it up first (a miss removes it from `Qout` before
//! the victim joins). The two differ only when `Qout` is full and the block is its oldest
//! entry. `variant=lcs` takes libCacheSim's order; the peer tests compare `mq:lcs` with
//! libCacheSim's `MQ` (equal miss counts). The paper's order is ember's default.
//!
//! History: `Qout` is a FIFO of fixed size, so a scan cannot grow memory.
//!
//! Memory: a node (key, links, count, queue, expiry) and its index entry per block, and a
//! node and an index entry per `Qout` entry (`qout` of them per block).

use super::params::{Domain, Param, VARIANT};
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::{fingerprint, Bucket, KeyMap};
use crate::slab::{List, Slab};
use crate::Access;

/// MQ's parameters.
pub const PARAMS: &[Param] = &[
    Param {
        name: "queues",
        domain: Domain::Int { min: 1, max: 64 },
        default: 8.0,
        help: "m, the number of LRU queues",
    },
    Param {
        name: "lifetime",
        domain: Domain::Int { min: 1, max: 1 << 40 },
        default: 10_000.0,
        help: "lifeTime, accesses a block stays in its queue unaccessed before it drops a queue",
    },
    Param {
        name: "qout",
        domain: Domain::Share { min: 0.0, max: 64.0 },
        default: 4.0,
        help: "size of the history Qout, relative to the cache",
    },
    VARIANT,
];

/// A resident block's state.
#[derive(Clone, Copy, Debug, Default)]
struct Meta {
    freq: u32,
    queue: u8,
    expire: u64,
}

/// The Multi-Queue policy (see the module documentation).
#[derive(Clone, Debug)]
pub struct Mq {
    map: KeyMap,
    slab: Slab<Meta>,
    queues: Vec<List>,
    lifetime: u64,
    now: u64,
    /// The history: evicted keys and their counts, FIFO.
    qout_map: KeyMap,
    qout_slab: Slab<u32>,
    qout: List,
    qout_cap: usize,
    /// libCacheSim's order of a miss (`variant=lcs`).
    lcs: bool,
}

impl Mq {
    /// An empty MQ cache of `capacity` blocks with `queues` queues, `lifetime` accesses and
    /// a history of `qout` times the capacity, the paper's order.
    pub fn new(capacity: usize, queues: usize, lifetime: u64, qout: f64) -> Self {
        Self::with_variant(capacity, queues, lifetime, qout, false)
    }

    /// As [`Mq::new`]; `lcs` selects libCacheSim's order of a miss.
    pub fn with_variant(
        capacity: usize,
        queues: usize,
        lifetime: u64,
        qout: f64,
        lcs: bool,
    ) -> Self {
        let qout_cap = (capacity as f64 * qout) as usize;
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity + 1),
            queues: vec![List::new(); queues.clamp(1, 64)],
            lifetime,
            now: 0,
            qout_map: KeyMap::with_entries(qout_cap),
            qout_slab: Slab::with_capacity(qout_cap + 1),
            qout: List::new(),
            qout_cap,
            lcs,
        }
    }

    fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    /// The slot of `key` if resident, else the index bucket to insert it at; `fp` is its
    /// fingerprint.
    #[inline(always)]
    fn lookup_fp(&self, key: u64, fp: u32) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find_fp(key, fp, |s| slab.key(s))
    }

    /// A hit on resident slot `i`: one more access, the MRU end of its count's queue.
    #[inline]
    fn hit(&mut self, i: u32) {
        let m = self.slab.node(i).meta;
        self.queues[m.queue as usize].unlink(self.slab.nodes_mut(), i);
        let freq = m.freq.saturating_add(1);
        self.slab.node_mut(i).meta.freq = freq;
        let q = self.queue_num(freq);
        self.link(i, q);
        self.adjust();
    }

    /// A miss on `key`, absent (looked up into `at`): make room, then insert it with its
    /// count from `Qout`. The eviction leaves `at` valid (index entries never move).
    #[inline]
    fn insert_absent(&mut self, at: Bucket, key: u64) -> Option<u64> {
        if self.capacity() == 0 {
            return None;
        }
        let mut ghost = if self.lcs { self.take_ghost(key) } else { None };
        let victim = if self.map.len() >= self.capacity() { self.evict() } else { None };
        if !self.lcs {
            ghost = self.take_ghost(key);
        }
        let freq = ghost.map_or(1, |f| f.saturating_add(1));
        let i = self.slab.alloc(key, Meta { freq, ..Meta::default() });
        self.map.insert_at(at, i);
        let q = self.queue_num(freq);
        self.link(i, q);
        self.adjust();
        victim
    }

    fn queue_num(&self, mut freq: u32) -> u8 {
        let mut q = 0;
        while freq > 1 && q + 1 < self.queues.len() {
            freq >>= 1;
            q += 1;
        }
        q as u8
    }

    /// Put slot `i` at the MRU end of the queue of its count, with a new expiry.
    fn link(&mut self, i: u32, queue: u8) {
        let m = &mut self.slab.node_mut(i).meta;
        m.queue = queue;
        m.expire = self.now + self.lifetime;
        self.queues[queue as usize].push_head(self.slab.nodes_mut(), i);
    }

    /// The paper's `Adjust`: advance time; each queue's expired LRU block drops a queue.
    fn adjust(&mut self) {
        self.now += 1;
        for k in 1..self.queues.len() {
            let t = self.queues[k].tail;
            if t != crate::slab::NIL && self.slab.node(t).meta.expire < self.now {
                self.queues[k].unlink(self.slab.nodes_mut(), t);
                self.link(t, (k - 1) as u8);
            }
        }
    }

    /// Take `key` out of `Qout`, returning its remembered count.
    fn take_ghost(&mut self, key: u64) -> Option<u32> {
        let slab = &self.qout_slab;
        let g = self.qout_map.get(key, |s| slab.key(s))?;
        let freq = self.qout_slab.node(g).meta;
        self.qout.unlink(self.qout_slab.nodes_mut(), g);
        self.qout_map.remove(key, g);
        self.qout_slab.release(g);
        Some(freq)
    }

    /// Remember an evicted key and its count at the young end of `Qout`.
    fn add_ghost(&mut self, key: u64, freq: u32) {
        if self.qout_cap == 0 {
            return;
        }
        if self.qout.len >= self.qout_cap {
            if let Some(old) = self.qout.pop_tail(self.qout_slab.nodes_mut()) {
                let k = self.qout_slab.key(old);
                self.qout_map.remove(k, old);
                self.qout_slab.release(old);
            }
        }
        let g = self.qout_slab.alloc(key, freq);
        self.qout.push_head(self.qout_slab.nodes_mut(), g);
        self.qout_map.insert(key, g);
    }

    /// Evict the LRU block of the lowest non-empty queue into `Qout`.
    fn evict(&mut self) -> Option<u64> {
        let q = self.queues.iter().position(|q| !q.is_empty())?;
        let v = self.queues[q].pop_tail(self.slab.nodes_mut())?;
        let key = self.slab.key(v);
        let freq = self.slab.node(v).meta.freq;
        self.map.remove(key, v);
        self.slab.release(v);
        self.add_ghost(key, freq);
        Some(key)
    }
}

impl FromSpec for Mq {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::with_variant(
            capacity,
            spec.value("queues", 8.0) as usize,
            spec.value("lifetime", 10_000.0) as u64,
            spec.value("qout", 4.0),
            spec.value("variant", 0.0) == 1.0,
        )
    }
}

impl Replacement for Mq {
    fn name(&self) -> &'static str {
        "mq"
    }

    fn capacity(&self) -> usize {
        self.slab.capacity() - 1
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    fn lookup(&mut self, access: &Access) -> bool {
        match self.find(access.key) {
            Some(i) => {
                self.hit(i);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        match self.lookup_fp(access.key, fingerprint(access.key)) {
            Err(at) => self.insert_absent(at, access.key),
            Ok(_) => {
                debug_assert!(false, "insert of a resident block");
                None
            }
        }
    }

    #[inline]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.prefetch_hint(key);
    }

    /// Loads the key's index group, and its group in `Qout`'s index (read on a miss).
    #[inline]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.map.prefetch_fp(fp);
        self.qout_map.prefetch_fp(fp);
        fp
    }

    /// The hint is the key's index fingerprint ([`Mq::prefetch_hint`]).
    #[inline]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        match self.lookup_fp(access.key, hint) {
            Ok(i) => {
                self.hit(i);
                (true, None)
            }
            Err(at) => (false, self.insert_absent(at, access.key)),
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        let q = self.slab.node(i).meta.queue as usize;
        self.queues[q].unlink(self.slab.nodes_mut(), i);
        self.map.remove(key, i);
        self.slab.release(i);
        true
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + self.slab.memory_bytes()
            + self.qout_map.memory_bytes()
            + self.qout_slab.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &mut Mq, keys: &[u64]) -> Vec<(bool, Option<u64>)> {
        keys.iter().enumerate().map(|(t, &k)| p.access(&Access::read(k, t as u64))).collect()
    }

    #[test]
    fn frequent_blocks_climb_queues_and_the_lowest_queue_loses_first() {
        let mut p = Mq::new(3, 8, 1000, 4.0);
        // 1 three times (Q1), 2 twice (Q1), 3 once (Q0): 4 evicts 3.
        let r = run(&mut p, &[1, 1, 1, 2, 2, 3, 4]);
        assert_eq!(r[6], (false, Some(3)));
        // 5 evicts 4 (Q0), not the older blocks of Q1.
        assert_eq!(run(&mut p, &[5])[0], (false, Some(4)));
    }

    #[test]
    fn an_expired_block_drops_a_queue() {
        let mut p = Mq::new(3, 8, 2, 4.0);
        // 1 twice: Q1, expiring 2 accesses later; then 2 and 3 (Q0) and hits on them.
        run(&mut p, &[1, 1, 2, 3, 2, 2, 3, 3]);
        // 1 was demoted to Q0 and is now its LRU: a new block evicts it.
        assert_eq!(run(&mut p, &[4])[0], (false, Some(1)));
    }

    #[test]
    fn a_block_back_from_qout_keeps_its_count() {
        let mut p = Mq::new(2, 8, 1000, 4.0);
        run(&mut p, &[1, 1, 1, 1, 2, 3]);
        // 1 (count 4, Q2) stayed; 2 left for 3. 2 returns with count 2: Q1, above 3.
        run(&mut p, &[2]);
        assert!(p.contains(1) && p.contains(2) && !p.contains(3));
        assert_eq!(p.slab.node(p.find(2).unwrap_or(0)).meta.freq, 2);
    }

    #[test]
    fn history_stays_bounded_under_a_long_scan() {
        let c = 500;
        let mut p = Mq::new(c, 8, 10_000, 4.0);
        let full = p.memory_bytes();
        for k in 0..(10 * c as u64) {
            p.access(&Access::read(k, k));
            assert!(p.qout.len <= 4 * c);
        }
        assert_eq!(p.qout.len, 4 * c);
        assert_eq!(p.memory_bytes(), full);
    }
}
