//! LIRS, the Low Inter-reference Recency Set (Jiang & Zhang, "LIRS: an efficient low
//! inter-reference recency set replacement policy to improve buffer cache performance",
//! SIGMETRICS 2002, section 3).
//!
//! Blocks of low inter-reference recency (LIR) hold most of the cache, `C - Lhirs` blocks;
//! the rest, `Lhirs` blocks (`hir`, default 1 %, at least one), hold resident blocks of high
//! recency (HIR). Stack S orders recently seen blocks by recency (LIR, resident HIR and
//! non-resident HIR), its bottom always LIR (stack pruning); queue Q holds the resident HIR
//! blocks, and a miss evicts Q's front. A hit on a HIR block in S makes it LIR and demotes
//! S's bottom LIR block to the end of Q; a HIR block hit outside S stays HIR. A miss on a
//! block still in S (non-resident HIR) loads it as LIR and demotes S's bottom; any other miss
//! loads a HIR block (LIR while the LIR set is not yet full).
//!
//! History: S's non-resident entries are bounded as libCacheSim bounds them: after each
//! access, while S holds more than `2C` entries, the entry that became non-resident the
//! earliest leaves S (a third list remembers that order). So a scan cannot grow memory.
//!
//! libCacheSim's `LIRS` (`LIRS.c`, fixed `Lhirs` of 1 %, at least one block) departs from
//! the paper, and `variant=lcs` reproduces it decision for decision: a hit on a resident HIR
//! block outside S demotes S's bottom LIR block to Q as well (evicting Q's front if Q is
//! full), so the LIR set shrinks by one until the next new block fills it; a miss on a
//! non-resident HIR block in S demotes two LIR blocks; stack pruning never removes S's top
//! entry; and with `Lhirs = 1` a HIR hit outside S may evict the hit block from Q's
//! accounting while it stays resident in S. Evictions that happen on a hit are not reported
//! (the [`Replacement`] interface reports evictions only on insertion), so the `lcs` variant
//! is for simulation; the peer tests compare `lirs:lcs` with libCacheSim's `LIRS` (equal
//! miss counts). The paper's form is ember's default.
//!
//! Memory: one node per entry of S or Q (at most `2C + Lhirs`) with three pairs of links
//! and its key index.

use super::multi_list::MultiList;
use super::params::{Domain, Param, VARIANT};
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::Access;

/// LIRS's parameters.
pub const PARAMS: &[Param] = &[
    Param {
        name: "hir",
        domain: Domain::Share { min: 0.0, max: 1.0 },
        default: 0.01,
        help: "Lhirs, the cache share of resident HIR blocks (at least one block)",
    },
    VARIANT,
];

/// Stack S.
const S: usize = 0;
/// Queue Q of resident HIR blocks.
const Q: usize = 1;
/// The non-resident HIR entries of S, in the order they became non-resident.
const NH: usize = 2;

/// A block's state in stack S.
#[derive(Clone, Copy, Debug, Default)]
struct State {
    lir: bool,
    resident: bool,
}

/// LIRS replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct Lirs {
    m: MultiList<State, 3>,
    c: usize,
    lirs_limit: usize,
    hirs_limit: usize,
    lirs: usize,
    hirs: usize,
    /// libCacheSim's form (`variant=lcs`).
    lcs: bool,
    /// libCacheSim's form: its count of resident blocks.
    occupied: usize,
    /// libCacheSim's form: the last block evicted.
    victim: Option<u64>,
}

impl Lirs {
    /// An empty LIRS cache of `capacity` blocks, `hir` of them for resident HIR blocks, the
    /// paper's form.
    pub fn new(capacity: usize, hir: f64) -> Self {
        Self::with_variant(capacity, hir, false)
    }

    /// An empty LIRS cache; `lcs` selects libCacheSim's form.
    pub fn with_variant(capacity: usize, hir: f64, lcs: bool) -> Self {
        let hirs_limit = ((hir * capacity as f64) as usize).max(1).min(capacity);
        Self {
            m: MultiList::with_capacity(3 * capacity + 16),
            c: capacity,
            lirs_limit: capacity - hirs_limit,
            hirs_limit,
            lirs: 0,
            hirs: 0,
            lcs,
            occupied: 0,
            victim: None,
        }
    }

    /// Drop node `i` if it is on no list any more.
    #[inline]
    fn release_if_unlisted(&mut self, i: u32) {
        if self.m.on_none(i) {
            self.m.release(i);
        }
    }

    /// Stack pruning: remove HIR entries from S's bottom until an LIR block is there
    /// (libCacheSim's form leaves S's top entry).
    fn prune(&mut self) {
        while let Some(t) = self.m.tail(S) {
            if self.m.meta(t).lir || (self.lcs && self.m.head(S) == Some(t)) {
                break;
            }
            if !self.m.meta(t).resident {
                self.m.unlink(NH, t);
            }
            self.m.unlink(S, t);
            self.release_if_unlisted(t);
        }
    }

    /// Bound S to `2C` entries by dropping the entries that became non-resident earliest.
    #[inline]
    fn limit_stack(&mut self) {
        while self.m.len(S) > 2 * self.c || (self.m.is_full() && self.m.len(NH) > 0) {
            let Some(t) = self.m.tail(NH) else { break };
            self.m.unlink(NH, t);
            self.m.unlink(S, t);
            self.release_if_unlisted(t);
        }
    }

    /// Evict Q's front: it leaves the cache and, if in S, stays there non-resident.
    fn evict_hir(&mut self) -> Option<u64> {
        let t = self.m.tail(Q)?;
        self.hirs -= 1;
        self.occupied = self.occupied.saturating_sub(1);
        self.m.unlink(Q, t);
        let key = self.m.key(t);
        if self.m.on(S, t) {
            self.m.meta_mut(t).resident = false;
            self.m.move_to_head(NH, t);
        } else {
            self.release_if_unlisted(t);
        }
        self.victim = Some(key);
        Some(key)
    }

    /// Demote S's bottom LIR block to the end of Q as a resident HIR block, then prune.
    /// The paper's form makes room in Q beforehand only where libCacheSim's does.
    fn demote_lir(&mut self) {
        if !self.lcs {
            // S's bottom is LIR whenever LIR blocks exist; a HIR entry can be there only
            // while the LIR set is empty (Lhirs = C), and pruning removes it.
            self.prune();
        }
        let Some(t) = self.m.tail(S) else { return };
        self.lirs = self.lirs.saturating_sub(1);
        self.m.unlink(S, t);
        if self.lcs {
            self.occupied = self.occupied.saturating_sub(1);
            while self.hirs + 1 > self.hirs_limit {
                if self.evict_hir().is_none() {
                    break;
                }
            }
            self.occupied += 1;
        }
        *self.m.meta_mut(t) = State { lir: false, resident: true };
        self.m.move_to_head(Q, t);
        self.hirs += 1;
        self.prune();
    }

    /// A new node for `key`, after making room in the pool if it is full.
    fn alloc(&mut self, key: u64, state: State) -> u32 {
        if self.m.is_full() {
            self.limit_stack();
        }
        self.m.alloc(key, state)
    }

    fn lookup_paper(&mut self, i: u32) -> bool {
        let st = self.m.meta(i);
        let in_s = self.m.on(S, i);
        if in_s && st.lir {
            self.m.move_to_head(S, i);
            self.prune();
            return true;
        }
        if in_s && st.resident {
            // A HIR block in S: it becomes LIR, and S's bottom LIR block goes to Q.
            self.m.move_to_head(S, i);
            self.m.unlink(Q, i);
            self.hirs -= 1;
            self.m.meta_mut(i).lir = true;
            self.lirs += 1;
            if self.lirs > self.lirs_limit {
                self.demote_lir();
            }
            return true;
        }
        if !in_s && self.m.on(Q, i) {
            // A HIR block not in S stays HIR, at the top of S and the end of Q.
            *self.m.meta_mut(i) = State { lir: false, resident: true };
            self.m.push_head(S, i);
            self.m.move_to_head(Q, i);
            return true;
        }
        false
    }

    fn insert_paper(&mut self, key: u64) -> Option<u64> {
        let mut victim = None;
        if self.lirs + self.hirs >= self.c {
            if self.m.len(Q) == 0 {
                self.demote_lir();
            }
            victim = self.evict_hir();
        }
        match self.m.find(key) {
            Some(i) => {
                // A non-resident HIR block in S: it comes back as LIR.
                self.m.unlink(NH, i);
                self.m.move_to_head(S, i);
                *self.m.meta_mut(i) = State { lir: true, resident: true };
                self.lirs += 1;
                if self.lirs > self.lirs_limit {
                    self.demote_lir();
                }
            }
            None if self.lirs < self.lirs_limit => {
                let i = self.alloc(key, State { lir: true, resident: true });
                self.m.push_head(S, i);
                self.lirs += 1;
            }
            None => {
                let i = self.alloc(key, State { lir: false, resident: true });
                self.m.push_head(S, i);
                self.m.push_head(Q, i);
                self.hirs += 1;
            }
        }
        self.limit_stack();
        victim
    }

    /// libCacheSim's lookup (`LIRS_find` with updates): S and Q move the block to their
    /// tops whether or not it is resident.
    fn lookup_lcs(&mut self, i: u32) -> bool {
        let (in_s, in_q) = (self.m.on(S, i), self.m.on(Q, i));
        if in_s {
            self.m.move_to_head(S, i);
        }
        if in_q {
            self.m.move_to_head(Q, i);
        }
        let st = self.m.meta(i);
        let hit = if in_s && st.lir {
            self.prune();
            true
        } else if in_s && st.resident {
            if in_q {
                self.hirs -= 1;
                self.m.unlink(Q, i);
                self.occupied -= 1;
            }
            self.make_room_for_lir();
            self.m.meta_mut(i).lir = true;
            self.lirs += 1;
            self.occupied += 1;
            true
        } else if !in_s && in_q {
            let key = self.m.key(i);
            self.make_room_for_lir();
            // Demoting may have evicted the block from Q (with Lhirs = 1): it returns to S.
            let j = match self.m.find(key) {
                Some(j) => j,
                None => self.alloc(key, State::default()),
            };
            *self.m.meta_mut(j) = State { lir: false, resident: true };
            self.m.push_head(S, j);
            true
        } else {
            false
        };
        if hit {
            self.limit_stack();
        }
        hit
    }

    /// libCacheSim: demote LIR blocks while the LIR set has no room for one more.
    fn make_room_for_lir(&mut self) {
        while self.lirs + 1 > self.lirs_limit && self.m.len(S) > 0 {
            self.demote_lir();
        }
    }

    /// libCacheSim's miss path: `LIRS_can_insert`, `LIRS_evict` until there is room, then
    /// `LIRS_insert`.
    fn insert_lcs(&mut self, key: u64) -> Option<u64> {
        self.victim = None;
        let found = self.m.find(key);
        let in_s = found.is_some_and(|i| self.m.on(S, i));
        let in_q = found.is_some_and(|i| self.m.on(Q, i));
        if let (Some(i), true) = (found, in_s) {
            debug_assert!(!self.m.meta(i).resident, "insert of a resident block");
            self.make_room_for_lir();
            self.m.unlink(NH, i);
        } else if !in_q {
            if self.lirs_limit < 1 || self.hirs_limit < 1 {
                return None; // libCacheSim admits no block into a cache this small
            }
            if self.lirs + 1 > self.lirs_limit && self.hirs + 1 > self.hirs_limit {
                while self.hirs + 1 > self.hirs_limit && self.evict_hir().is_some() {}
            }
        } else {
            debug_assert!(false, "insert of a resident block");
            return None;
        }
        while self.occupied + 1 > self.c {
            let before = (self.occupied, self.lirs, self.hirs);
            self.evict_lcs(key);
            if (self.occupied, self.lirs, self.hirs) == before {
                break;
            }
        }
        match self.m.find(key) {
            Some(i) if self.m.on(S, i) && !self.m.meta(i).lir && !self.m.meta(i).resident => {
                *self.m.meta_mut(i) = State { lir: true, resident: true };
                self.lirs += 1;
                self.occupied += 1;
            }
            Some(_) => {}
            None => {
                if self.lirs < self.lirs_limit {
                    let i = self.alloc(key, State { lir: true, resident: true });
                    self.m.push_head(S, i);
                    self.lirs += 1;
                } else {
                    let i = self.alloc(key, State { lir: false, resident: true });
                    self.m.push_head(S, i);
                    self.m.push_head(Q, i);
                    self.hirs += 1;
                }
                self.occupied += 1;
            }
        }
        self.limit_stack();
        self.victim
    }

    /// libCacheSim's `LIRS_evict` for a miss on `key`.
    fn evict_lcs(&mut self, key: u64) {
        let found = self.m.find(key);
        let in_s = found.is_some_and(|i| self.m.on(S, i));
        let in_q = found.is_some_and(|i| self.m.on(Q, i));
        if let (Some(i), true) = (found, in_s) {
            let st = self.m.meta(i);
            if !st.lir && !st.resident {
                while self.hirs >= self.hirs_limit && self.evict_hir().is_some() {}
                self.demote_lir();
            }
        } else if !in_q && self.lirs + 1 > self.lirs_limit && self.hirs + 1 > self.hirs_limit {
            self.evict_hir();
        }
    }
}

impl FromSpec for Lirs {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::with_variant(capacity, spec.value("hir", 0.01), spec.value("variant", 0.0) == 1.0)
    }
}

impl Replacement for Lirs {
    fn name(&self) -> &'static str {
        "lirs"
    }

    fn capacity(&self) -> usize {
        self.c
    }

    fn len(&self) -> usize {
        if self.lcs {
            self.occupied
        } else {
            self.lirs + self.hirs
        }
    }

    fn contains(&self, key: u64) -> bool {
        self.m
            .find(key)
            .is_some_and(|i| self.m.on(Q, i) || (self.m.on(S, i) && self.m.meta(i).resident))
    }

    fn lookup(&mut self, access: &Access) -> bool {
        let Some(i) = self.m.find(access.key) else {
            return false;
        };
        if self.lcs {
            self.lookup_lcs(i)
        } else {
            self.lookup_paper(i)
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.c == 0 {
            return None;
        }
        if self.lcs {
            self.insert_lcs(access.key)
        } else {
            self.insert_paper(access.key)
        }
    }

    /// Starts loading the index group of `key`.
    #[inline]
    fn prefetch(&self, key: u64) {
        self.m.prefetch(key);
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(i) = self.m.find(key) else {
            return false;
        };
        let st = self.m.meta(i);
        let in_s = self.m.on(S, i);
        if in_s && st.lir {
            self.m.unlink(S, i);
            self.lirs -= 1;
            self.occupied = self.occupied.saturating_sub(1);
            self.m.release(i);
            self.prune();
            return true;
        }
        let resident = self.m.on(Q, i) || (in_s && st.resident);
        if !resident {
            return false;
        }
        if self.m.on(Q, i) {
            self.hirs -= 1;
        }
        self.occupied = self.occupied.saturating_sub(1);
        self.m.unlink(Q, i);
        self.m.unlink(S, i);
        self.m.release(i);
        true
    }

    fn memory_bytes(&self) -> usize {
        self.m.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &mut Lirs, keys: &[u64]) -> Vec<(bool, Option<u64>)> {
        keys.iter().enumerate().map(|(t, &k)| p.access(&Access::read(k, t as u64))).collect()
    }

    #[test]
    fn a_hir_block_hit_in_s_becomes_lir_and_the_bottom_lir_block_leaves_for_q() {
        let mut p = Lirs::new(3, 0.34);
        // 1, 2 LIR; 3 HIR resident (in S and Q).
        run(&mut p, &[1, 2, 3]);
        assert_eq!((p.lirs, p.hirs), (2, 1));
        // 3 hit in S: LIR; 1 (S's bottom) becomes HIR in Q.
        assert_eq!(run(&mut p, &[3])[0], (true, None));
        assert!(p.m.meta(p.m.find(3).unwrap_or(0)).lir);
        let one = p.m.find(1).unwrap_or(0);
        assert!(!p.m.meta(one).lir && p.m.on(Q, one));
        // A new block evicts Q's front: 1.
        assert_eq!(run(&mut p, &[4])[0], (false, Some(1)));
    }

    #[test]
    fn a_scan_evicts_only_hir_blocks_and_the_lir_set_survives() {
        let mut p = Lirs::new(100, 0.01);
        let hot: Vec<u64> = (0..99).collect();
        run(&mut p, &hot);
        run(&mut p, &hot);
        let scan: Vec<u64> = (1000..6000).collect();
        run(&mut p, &scan);
        let r = run(&mut p, &hot);
        assert!(r.iter().all(|x| x.0), "the LIR blocks stay through a scan");
    }

    /// Stack S keeps non-resident entries; a scan of ten times the capacity with reuse of
    /// each key once keeps S at most `2C` entries and the pool within its reservation.
    #[test]
    fn history_stays_bounded_under_a_long_scan() {
        for lcs in [false, true] {
            let c = 500;
            let mut p = Lirs::with_variant(c, 0.01, lcs);
            let full = p.memory_bytes();
            for k in 0..(10 * c as u64) {
                // Each key twice, far apart: non-resident HIR entries pile up in S.
                p.access(&Access::read(k, 2 * k));
                p.access(&Access::read(k / 2, 2 * k + 1));
                assert!(p.m.len(S) <= 2 * c, "S has {} entries", p.m.len(S));
            }
            assert_eq!(p.memory_bytes(), full);
            assert!(p.len() <= c);
        }
    }

    #[test]
    fn removal_of_lir_and_hir_blocks() {
        let mut p = Lirs::new(3, 0.34);
        run(&mut p, &[1, 2, 3]);
        assert!(p.remove(1) && p.remove(3));
        assert!(!p.remove(1) && !p.contains(3));
        assert_eq!(p.len(), 1);
        assert_eq!(run(&mut p, &[4, 5, 6])[2], (false, Some(5)));
    }
}
