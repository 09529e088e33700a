//! Every policy's decisions pinned: a digest of each access's outcome (hit, evicted block)
//! for every policy, at its default parameters and seed and in libCacheSim's variants, over
//! a fixed sequence that drives each entry point the simulator and the real cache use
//! (`access`, the hinted access, `lookup` then `insert`, `remove`). A change that makes a
//! policy faster must leave its digests as they are: the same seed, the same decisions.

use super::{Kind, Spec};
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
    let mut p = super::build(*spec, capacity);
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
const CAPACITIES: [usize; 4] = [1, 60, 200, 700];

/// (spec, capacity, digest, misses), as the policies decided when they were pinned.
#[rustfmt::skip]
const PINNED: &[(&str, usize, u64, u64)] = &[
    ("lru", 1, 0x518f1c4ae1a88c00, 59980),
    ("lru", 60, 0x941b02101d13a151, 58427),
    ("lru", 200, 0x7d61f3283a466272, 54859),
    ("lru", 700, 0x64428b482aa29b63, 42665),
    ("fifo", 1, 0x518f1c4ae1a88c00, 59980),
    ("fifo", 60, 0x714acdc87304430c, 58440),
    ("fifo", 200, 0x2cd907103b016406, 54907),
    ("fifo", 700, 0xe233c65a5f356d3c, 43475),
    ("clock", 1, 0x518f1c4ae1a88c00, 59980),
    ("clock", 60, 0x147ae58f69cc2062, 58416),
    ("clock", 200, 0xd084b61cf30726c8, 54768),
    ("clock", 700, 0x6b72fd1088aba0f3, 42111),
    ("sieve", 1, 0x518f1c4ae1a88c00, 59980),
    ("sieve", 60, 0x98b7eb585cdf14a7, 57956),
    ("sieve", 200, 0x83ad0a2fa1a33610, 53230),
    ("sieve", 700, 0x3c9e56ffe3041a19, 38940),
    ("arc", 1, 0x518f1c4ae1a88c00, 59980),
    ("arc", 60, 0x6bfe2d0b28292a45, 57978),
    ("arc", 200, 0x0bffa208b0db22e0, 53314),
    ("arc", 700, 0x479ce876017293e3, 39022),
    ("slru", 1, 0x518f1c4ae1a88c00, 59980),
    ("slru", 60, 0xd92627857a162025, 58120),
    ("slru", 200, 0x8bbe22b3b711bccd, 53959),
    ("slru", 700, 0x540c8294e0e6f2c0, 40371),
    ("2q", 1, 0x518f1c4ae1a88c00, 59980),
    ("2q", 60, 0xfa810a409ddada41, 57988),
    ("2q", 200, 0x6dd4fcd8266bd7ae, 53581),
    ("2q", 700, 0x581f4e312cc4893d, 39676),
    ("s3fifo", 1, 0x518f1c4ae1a88c00, 59980),
    ("s3fifo", 60, 0xb2ea28888b30aade, 57840),
    ("s3fifo", 200, 0x27a930d0ce5f589d, 53055),
    ("s3fifo", 700, 0xab78e0ec18801f3b, 38100),
    ("lfu", 1, 0x518f1c4ae1a88c00, 59980),
    ("lfu", 60, 0x7584cdf0f7dd4d9a, 57955),
    ("lfu", 200, 0xd59836001a190062, 53527),
    ("lfu", 700, 0x3c9e56ffe3041a19, 38940),
    ("lfuda", 1, 0x518f1c4ae1a88c00, 59980),
    ("lfuda", 60, 0x09f0246faad6d89d, 58420),
    ("lfuda", 200, 0x3dbccb68218941a9, 54773),
    ("lfuda", 700, 0x9454f6e694737d34, 40147),
    ("lruk", 1, 0x518f1c4ae1a88c00, 59980),
    ("lruk", 60, 0xc6ea8fd9e223d5dc, 57883),
    ("lruk", 200, 0x0e9f8ad6aa2c0d26, 53506),
    ("lruk", 700, 0x3c9e56ffe3041a19, 38940),
    ("random", 1, 0x518f1c4ae1a88c00, 59980),
    ("random", 60, 0xfbc854b977e99ba4, 58430),
    ("random", 200, 0x1663992fde561251, 54958),
    ("random", 700, 0x1cc62787a0b393eb, 43540),
    ("hyperbolic", 1, 0x518f1c4ae1a88c00, 59980),
    ("hyperbolic", 60, 0xa2c325a84f172916, 58417),
    ("hyperbolic", 200, 0x7bdf399d30739f9b, 54773),
    ("hyperbolic", 700, 0x993082351d2817b4, 41851),
    ("lecar", 1, 0x518f1c4ae1a88c00, 59980),
    ("lecar", 60, 0x1f2bf89efea35244, 58426),
    ("lecar", 200, 0x1420eb3d7ec47b9f, 54854),
    ("lecar", 700, 0x7a41819ff6aeffea, 42624),
    ("wtinylfu", 1, 0x518f1c4ae1a88c00, 59980),
    ("wtinylfu", 60, 0x8c5fe78f207dec38, 57927),
    ("wtinylfu", 200, 0x34dc83680607e81e, 53069),
    ("wtinylfu", 700, 0x53f7f15de1e18d27, 36900),
    ("lirs", 1, 0x518f1c4ae1a88c00, 59980),
    ("lirs", 60, 0x9c471c46c8123f3b, 57907),
    ("lirs", 200, 0x66bad55580b33b1b, 53164),
    ("lirs", 700, 0x67f5be202c222e3c, 38836),
    ("clockpro", 1, 0x518f1c4ae1a88c00, 59980),
    ("clockpro", 60, 0xaa10e369db16ab10, 57844),
    ("clockpro", 200, 0x19a41f764923e4c1, 53025),
    ("clockpro", 700, 0xecefe3a0d2dbd79f, 38170),
    ("mq", 1, 0x518f1c4ae1a88c00, 59980),
    ("mq", 60, 0x56bf1a4731f4196f, 57830),
    ("mq", 200, 0x0a6d6cb9f5edd261, 52543),
    ("mq", 700, 0x52022ffdf9a5ecc2, 34709),
    ("car", 1, 0x518f1c4ae1a88c00, 59980),
    ("car", 60, 0x573ddd95187508b0, 57922),
    ("car", 200, 0x6f7336c710fe6ab7, 53249),
    ("car", 700, 0x2b8bd0db9cdecce0, 38451),
    ("cacheus", 1, 0x518f1c4ae1a88c00, 59980),
    ("cacheus", 60, 0x1a1cd040c7be355b, 58199),
    ("cacheus", 200, 0x15391cc01d0d1a5b, 53376),
    ("cacheus", 700, 0xfabe0222c26a5212, 38211),
    ("lhd", 1, 0x518f1c4ae1a88c00, 59980),
    ("lhd", 60, 0x3bab1798035113f6, 58207),
    ("lhd", 200, 0xec41ffaadb1b4da6, 54285),
    ("lhd", 700, 0x327865d3ad1f0b8a, 42103),
    ("wtinylfu:variant=lcs", 1, 0x518f1c4ae1a88c00, 59980),
    ("wtinylfu:variant=lcs", 60, 0x82462449c16ec116, 58073),
    ("wtinylfu:variant=lcs", 200, 0x566c9f2c4aae082f, 53147),
    ("wtinylfu:variant=lcs", 700, 0x3306475bbfb6c6f4, 36181),
    ("cacheus:variant=lcs", 1, 0x518f1c4ae1a88c00, 59980),
    ("cacheus:variant=lcs", 60, 0x79c5c0055ad6e150, 58188),
    ("cacheus:variant=lcs", 200, 0x9b4ee3ec4bd558fb, 53454),
    ("cacheus:variant=lcs", 700, 0xe094664efa2efeb8, 36149),
    ("lfuda:variant=lcs", 1, 0x518f1c4ae1a88c00, 59980),
    ("lfuda:variant=lcs", 60, 0x538b3968960b6605, 57893),
    ("lfuda:variant=lcs", 200, 0x1f971eabcb25dba1, 52981),
    ("lfuda:variant=lcs", 700, 0x353700d1687ec898, 36722),
    ("mq:variant=lcs", 1, 0x518f1c4ae1a88c00, 59980),
    ("mq:variant=lcs", 60, 0xd052ee00a8eccc8a, 57830),
    ("mq:variant=lcs", 200, 0xce89da2534715a3e, 52528),
    ("mq:variant=lcs", 700, 0x52022ffdf9a5ecc2, 34709),
    ("lirs:variant=lcs", 1, 0x982f7205d4482cc5, 60000),
    ("lirs:variant=lcs", 60, 0x8b0bc8344480a50c, 57910),
    ("lirs:variant=lcs", 200, 0xb36d0d1c466c0cd2, 53163),
    ("lirs:variant=lcs", 700, 0x60e3c4913d90fb25, 38816),
    ("lruk:k=3", 1, 0x518f1c4ae1a88c00, 59980),
    ("lruk:k=3", 60, 0xdbff4f363a38c68e, 58347),
    ("lruk:k=3", 200, 0xc40c7067fc8f793d, 54160),
    ("lruk:k=3", 700, 0xfaf64029b66ed09b, 39151),
];

#[test]
fn every_policy_decides_as_pinned() {
    let mut got = Vec::new();
    for spec in specs() {
        for cap in CAPACITIES {
            let (digest, misses) = outcomes(&spec, cap);
            got.push((spec.to_string(), cap, digest, misses));
        }
    }
    let table: String =
        got.iter().map(|(s, c, d, m)| format!("    (\"{s}\", {c}, {d:#018x}, {m}),\n")).collect();
    let want: Vec<(String, usize, u64, u64)> =
        PINNED.iter().map(|&(s, c, d, m)| (s.to_owned(), c, d, m)).collect();
    assert_eq!(got, want, "the pinned table, as the policies decide now:\n{table}");
}
