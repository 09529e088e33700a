//! The learning LeCaR and CACHEUS share (Vietri et al., "Driving cache replacement with
//! ML-based LeCaR", HotStorage 2018, section 3, Algorithm 1; Rodriguez et al., "Learning cache
//! replacement with CACHEUS", FAST 2021, section 4): two experts, a recency one and a
//! frequency one, each name a victim, and a full cache follows one of them drawn by their
//! weights. The block evicted on an expert's advice enters that expert's history, a FIFO of
//! a bounded number of blocks; a later miss on a block still there is the expert's regret, and
//! the policy lowers its weight (each policy by its own rule, which stays in its file). When
//! both experts name the same block it leaves without entering either history and without a
//! draw.
//!
//! The draw is libCacheSim's, `(rand() % 100) / 100 < w_LRU`, from the policy's own
//! generator (so a policy that draws for other reasons keeps one sequence of draws).

use super::queue::Queue;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Which expert named an evicted block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expert {
    /// The recency expert (LRU, SR-LRU).
    Lru,
    /// The frequency expert (LFU, CR-LFU).
    Lfu,
}

/// The two experts' weights and histories; each history entry keeps a block's key and `M`
/// (LeCaR: the time of its eviction).
#[derive(Clone, Debug)]
pub(super) struct Experts<M> {
    history_lru: Queue<M>,
    history_lfu: Queue<M>,
    /// The probability of following the recency expert (the frequency expert's is
    /// `1 − w_lru`).
    pub(super) w_lru: f64,
}

impl<M: Copy + Default> Experts<M> {
    /// Weights of 0.5 each and histories of `history` blocks each.
    pub(super) fn new(history: usize) -> Self {
        Self {
            history_lru: Queue::with_capacity(history),
            history_lfu: Queue::with_capacity(history),
            w_lru: 0.5,
        }
    }

    /// The victim of a full cache whose recency expert names `by_lru` and frequency expert
    /// `by_lfu`, and the expert followed: `None` when they agree (nothing is drawn then).
    #[inline]
    pub(super) fn choose(
        &self,
        by_lru: u32,
        by_lfu: u32,
        rng: &mut Xoshiro256PlusPlus,
    ) -> (u32, Option<Expert>) {
        if by_lru == by_lfu {
            (by_lfu, None)
        } else if (rng.gen_range(0..100u32) as f64 / 100.0) < self.w_lru {
            (by_lru, Some(Expert::Lru))
        } else {
            (by_lfu, Some(Expert::Lfu))
        }
    }

    /// `key`, evicted on `expert`'s advice, enters that expert's history with `meta` (the
    /// oldest entry leaves a full history). A history of no room, or one already holding
    /// `key`, is left as it is.
    pub(super) fn remember(&mut self, expert: Expert, key: u64, meta: M) {
        self.history_mut(expert).push_bounded(key, meta);
    }

    /// A miss on `key`: the expert whose history holds it (the recency expert's is asked
    /// first) and what the entry kept; the entry leaves. `None` if neither holds it.
    pub(super) fn regret(&mut self, key: u64) -> Option<(Expert, M)> {
        for expert in [Expert::Lru, Expert::Lfu] {
            let h = self.history_mut(expert);
            if let Some(i) = h.find(key) {
                let meta = h.node(i).meta;
                h.remove_node(i);
                return Some((expert, meta));
            }
        }
        None
    }

    /// True if `expert`'s history holds `key`.
    #[cfg(test)]
    pub(super) fn remembers(&self, expert: Expert, key: u64) -> bool {
        match expert {
            Expert::Lru => self.history_lru.find(key).is_some(),
            Expert::Lfu => self.history_lfu.find(key).is_some(),
        }
    }

    fn history_mut(&mut self, expert: Expert) -> &mut Queue<M> {
        match expert {
            Expert::Lru => &mut self.history_lru,
            Expert::Lfu => &mut self.history_lfu,
        }
    }

    /// Bytes of the two histories.
    pub(super) fn memory_bytes(&self) -> usize {
        self.history_lru.memory_bytes() + self.history_lfu.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn agreeing_experts_draw_nothing() {
        let e: Experts<()> = Experts::new(4);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let before = rng.clone();
        assert_eq!(e.choose(7, 7, &mut rng), (7, None));
        assert_eq!(rng, before);
    }

    #[test]
    fn the_weight_decides_the_draw() {
        let mut e: Experts<()> = Experts::new(4);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        e.w_lru = 1.0;
        assert!((0..100).all(|_| e.choose(1, 2, &mut rng) == (1, Some(Expert::Lru))));
        e.w_lru = 0.0;
        assert!((0..100).all(|_| e.choose(1, 2, &mut rng) == (2, Some(Expert::Lfu))));
    }

    #[test]
    fn a_history_keeps_its_newest_blocks_and_a_regret_takes_the_entry() {
        let mut e: Experts<u64> = Experts::new(2);
        for (t, k) in [10u64, 11, 12].into_iter().enumerate() {
            e.remember(Expert::Lru, k, t as u64);
        }
        e.remember(Expert::Lfu, 20, 5);
        assert!(!e.remembers(Expert::Lru, 10));
        assert_eq!(e.regret(11), Some((Expert::Lru, 1)));
        assert_eq!(e.regret(11), None);
        assert_eq!(e.regret(20), Some((Expert::Lfu, 5)));
        assert!(e.remembers(Expert::Lru, 12));
        // No room at all: nothing is kept.
        let mut none: Experts<u64> = Experts::new(0);
        none.remember(Expert::Lru, 1, 0);
        assert_eq!(none.regret(1), None);
    }
}
