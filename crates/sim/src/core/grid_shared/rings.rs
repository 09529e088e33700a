//! CLOCK at every size: a ring of entry ids per size, and per size two bits per entry (the
//! entries' `clock` bitmaps: the size's cache holds the key; its reference bit).
//!
//! A ring is the policy's queue read as a circle from its hand: CLOCK first passes every
//! referenced entry (clearing its bit, which is [`ember_policy::Clock`]'s "move to the
//! head"), then replaces the first unreferenced one, clearing its bit (a sweep of the entries
//! frees it if no other cell holds the key). Each size's bits are a bitmap of their own, a
//! quarter of a byte per entry, so the hand's walk reads a megabyte or so that stays close to
//! the core. Misses and evictions equal [`ember_policy::Clock`]'s (one reference bit, new
//! blocks unreferenced) at each capacity. (FIFO needs no ring: `fifo_stamps.rs`.)

use super::entries::Entries;
use super::CellCounts;

/// How far ahead of the hand the ring's entries are loaded (CLOCK's hand may pass many
/// referenced entries before it evicts one).
const AHEAD: usize = 8;

/// How far past the hand (in places) the ring's memory is loaded ahead.
const RING_LINE_AHEAD: usize = 48;

/// One size's ring.
#[derive(Debug)]
struct Ring {
    cap: usize,
    ids: Vec<u32>,
    hand: usize,
    counts: CellCounts,
}

impl Ring {
    /// Advance the hand, and start loading the bits (in `bits`, this size's bitmap) of the
    /// entry `AHEAD` places past it.
    #[inline(always)]
    fn step(&mut self, bits: &[u64]) {
        self.hand += 1;
        if self.hand == self.cap {
            self.hand = 0;
        }
        let mut ahead = self.hand + AHEAD;
        if ahead >= self.cap {
            ahead %= self.cap;
        }
        if let Some(w) = bits.get(self.ids[ahead] as usize / 32) {
            ember_policy::prefetch::prefetch(w);
        }
        // The ring's own line further on (written a whole revolution ago).
        if let Some(id) = self.ids.get(self.hand + RING_LINE_AHEAD) {
            ember_policy::prefetch::prefetch(id);
        }
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
        let (w, sh) = (x as usize / 32, 2 * (x % 32));
        for (r, bits) in self.rings.iter_mut().zip(es.clock.iter_mut()) {
            if bits[w] >> sh & 1 != 0 {
                if write {
                    r.counts.write_hits += 1;
                } else {
                    r.counts.read_hits += 1;
                }
                bits[w] |= 2 << sh;
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
                    let (vw, vs) = (v as usize / 32, 2 * (v % 32));
                    if bits[vw] >> vs & 2 != 0 {
                        bits[vw] &= !(2 << vs);
                    } else {
                        bits[vw] &= !(1 << vs);
                        r.ids[r.hand] = x;
                        break;
                    }
                    r.step(bits);
                }
                r.step(bits);
                r.counts.evictions += 1;
            }
            bits[w] |= 1 << sh;
        }
    }

    /// The counts of size `i` (in the order of [`Rings::new`]'s `caps`).
    pub fn counts(&self, i: usize) -> CellCounts {
        self.rings[i].counts
    }
}
