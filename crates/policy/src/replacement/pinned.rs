//! Every policy's decisions pinned: a digest of each access's outcome (hit, evicted block)
//! for every policy, at its default parameters and seed and in libCacheSim's variants, over
//! a fixed sequence that drives each entry point the simulator and the real cache use
//! (`access`, the hinted access, `lookup` then `insert`, `remove`). A change that makes a
//! policy faster must leave its digests as they are: the same seed, the same decisions.

use super::{Kind, Replacement, Spec};
use crate::Access;

/// FNV-1a over the outcomes, 64 bits.
struct Digest(u64);

impl Digest {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The digest and the number of misses of `spec` at `capacity` over the fixed sequence.
fn outcomes(spec: &Spec, capacity: usize) -> (u64, u64) {
    let keys = super::testing::skewed_keys(60_000, 4000, 0x9E37_79B9_7F4A_7C15);
    let mut p = super::build(spec.clone(), capacity);
    let (mut d, mut misses) = (Digest::new(), 0u64);
    for (t, &k) in keys.iter().enumerate() {
        let a = Access::read(k, t as u64);
        let (hit, evicted) = match t % 10 {
            // The real cache's path: a lookup, then an insertion of the miss.
            0..=2 => {
                let hit = p.lookup(&a);
                (hit, if hit { None } else { p.insert(&a) })
            }
            // The simulator's path.
            3..=6 => {
                let hint = p.prefetch_hint(k);
                p.access_hinted(&a, hint)
            }
            _ if t % 31 == 7 && !spec.evicts_on_hits() => {
                // An invalidation, then the access.
                d.add(u64::from(p.remove(k ^ 1)));
                p.access(&a)
            }
            _ => p.access(&a),
        };
        misses += u64::from(!hit);
        d.add(u64::from(hit));
        d.add(evicted.unwrap_or(u64::MAX));
    }
    d.add(p.len() as u64);
    (d.0, misses)
}

/// The policies pinned: every one but the oracle, and libCacheSim's variants.
fn specs() -> Vec<Spec> {
    let mut specs: Vec<Spec> =
        Kind::ALL.iter().filter(|k| !k.needs_oracle()).map(|&k| Spec::new(k)).collect();
    for extra in ["wtinylfu:lcs", "cacheus:lcs", "lfuda:lcs", "mq:lcs", "lirs:lcs", "lruk:k=3"] {
        specs.push(extra.parse().unwrap_or_else(|e| panic!("{extra}: {e}")));
    }
    specs
}

/// Capacities pinned.
const CAPACITIES: [usize; 3] = [1, 60, 700];

/// (spec, capacity, digest, misses), as the policies decided when they were pinned.
const PINNED: &[(&str, usize, u64, u64)] = &[];

#[test]
fn every_policy_decides_as_pinned() {
    let mut got = Vec::new();
    for spec in specs() {
        for cap in CAPACITIES {
            let (digest, misses) = outcomes(&spec, cap);
            got.push((spec.to_string(), cap, digest, misses));
        }
    }
    let table: String = got
        .iter()
        .map(|(s, c, d, m)| format!("    (\"{s}\", {c}, {d:#018x}, {m}),\n"))
        .collect();
    let want: Vec<(String, usize, u64, u64)> =
        PINNED.iter().map(|&(s, c, d, m)| (s.to_owned(), c, d, m)).collect();
    assert_eq!(got, want, "the pinned table, as the policies decide now:\n{table}");
}
