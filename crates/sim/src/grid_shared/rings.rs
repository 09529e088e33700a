//! CLOCK at every size: a ring of entry ids per size, and in each entry a bit per size saying
//! that size's cache holds the key and a reference bit per size.
//!
//! A ring is the policy's queue read as a circle from its hand: CLOCK first passes every
//! referenced entry (clearing its bit, which is [`ember_policy::Clock`]'s "move to the
//! head"), then replaces the first unreferenced one. Evicting touches the victim's entry to
//! clear its bit, and frees the entry if no other cell holds the key. Misses and evictions
//! equal [`ember_policy::Clock`]'s (one reference bit, new blocks unreferenced) at each
//! capacity. (FIFO needs no ring: `fifo_stamps.rs`.)

use super::entries::Entries;
use super::CellCounts;

/// How far ahead of the hand the ring's entries are loaded (CLOCK's hand may pass many
/// referenced entries before it evicts one).
const AHEAD: usize = 8;

/// One size's ring.
#[derive(Debug)]
struct Ring {
    cap: usize,
    ids: Vec<u32>,
    hand: usize,
    counts: CellCounts,
}

impl Ring {
    /// Advance the hand, and start loading the entry `AHEAD` places past it.
    #[inline(always)]
    fn step(&mut self, es: &Entries) {
        self.hand += 1;
        if self.hand == self.cap {
            self.hand = 0;
        }
        let mut ahead = self.hand + AHEAD;
        if ahead >= self.cap {
            ahead %= self.cap;
        }
        es.prefetch_entry(self.ids[ahead]);
    }
}

/// CLOCK's rings, one per size.
#[derive(Debug)]
pub(crate) struct Rings {
    rings: Vec<Ring>,
}

impl Rings {
    /// Rings at capacities `caps` (any order).
    pub fn new(caps: &[usize]) -> Self {
        let rings = caps
            .iter()
            .map(|&cap| Ring {
                cap,
                ids: Vec::with_capacity(cap.min(1 << 20)),
                hand: 0,
                counts: CellCounts::default(),
            })
            .collect();
        Self { rings }
    }

    /// Simulate an access to entry `x` at every size.
    #[inline(always)]
    pub fn access(&mut self, es: &mut Entries, x: u32, write: bool) {
        let held = es.get(x).clock;
        for (i, r) in self.rings.iter_mut().enumerate() {
            let bit = 1u8 << i;
            if held & bit != 0 {
                if write {
                    r.counts.write_hits += 1;
                } else {
                    r.counts.read_hits += 1;
                }
                es.get_mut(x).clock_ref |= bit;
                continue;
            }
            if r.cap == 0 {
                continue;
            }
            if r.ids.len() < r.cap {
                r.ids.push(x);
            } else {
                loop {
                    let v = r.ids[r.hand];
                    let e = es.get_mut(v);
                    if e.clock_ref & bit != 0 {
                        e.clock_ref &= !bit;
                    } else {
                        e.clock &= !bit;
                        r.ids[r.hand] = x;
                        es.release_if_empty(v);
                        break;
                    }
                    r.step(es);
                }
                r.step(es);
                r.counts.evictions += 1;
            }
            es.get_mut(x).clock |= bit;
        }
    }

    /// The counts of size `i` (in the order of [`Rings::new`]'s `caps`).
    pub fn counts(&self, i: usize) -> CellCounts {
        self.rings[i].counts
    }
}
