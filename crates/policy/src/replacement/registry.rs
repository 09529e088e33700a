//! Construction of a replacement policy from a [`Spec`]: boxed ([`build`]) or concrete
//! ([`with_replacement!`](crate::with_replacement)), so a hot loop is compiled once per
//! policy type and its calls are static.

use super::spec::{FromSpec, Spec};
use super::{Arc, Fifo, Lru, LruLog, Opt, Replacement, Sieve};

macro_rules! from_new {
    ($($t:ty),*) => {$(
        impl FromSpec for $t {
            fn from_spec(capacity: usize, _spec: &Spec) -> Self {
                Self::new(capacity)
            }
        }
    )*};
}
from_new!(Lru, LruLog, Fifo, Sieve, Arc, Opt);

/// A policy `spec` (a [`Kind`] for its default parameters) with `capacity` blocks, boxed.
pub fn build(spec: impl Into<Spec>, capacity: usize) -> Box<dyn Replacement> {
    let spec: Spec = spec.into();
    crate::with_replacement!(spec, capacity, |p| Box::new(p) as Box<dyn Replacement>)
}

/// Run `body` with `p` bound to a concrete policy of `spec` (a [`Spec`], or a [`Kind`] for
/// its default parameters) and `capacity` blocks, so the body is compiled once per policy type
/// and its calls are static:
///
/// ```
/// use ember_policy::{with_replacement, Access, Replacement, replacement::Kind};
/// let misses = with_replacement!(Kind::Lru, 2, |p| {
///     [1u64, 2, 1, 3, 2].iter().enumerate()
///         .filter(|(t, &k)| !p.access(&Access::read(k, *t as u64)).0)
///         .count()
/// });
/// assert_eq!(misses, 4);
/// ```
#[macro_export]
macro_rules! with_replacement {
    ($spec:expr, $capacity:expr, |$p:ident| $body:expr) => {{
        use $crate::replacement as __r;
        use $crate::replacement::FromSpec as _;
        let __spec: __r::Spec = __r::Spec::from($spec);
        let __capacity: usize = $capacity;
        match __spec.kind() {
            // A state beyond the caches: LRU as a log of accesses (the same decisions).
            __r::Kind::Lru if __r::LruLog::preferred(__capacity) => {
                #[allow(unused_mut)]
                let mut $p = __r::LruLog::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Lru => {
                #[allow(unused_mut)]
                let mut $p = __r::Lru::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Fifo => {
                #[allow(unused_mut)]
                let mut $p = __r::Fifo::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Clock => {
                #[allow(unused_mut)]
                let mut $p = __r::Clock::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Sieve => {
                #[allow(unused_mut)]
                let mut $p = __r::Sieve::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Arc => {
                #[allow(unused_mut)]
                let mut $p = __r::Arc::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Slru => {
                #[allow(unused_mut)]
                let mut $p = __r::Slru::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::TwoQ => {
                #[allow(unused_mut)]
                let mut $p = __r::TwoQ::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::S3Fifo => {
                #[allow(unused_mut)]
                let mut $p = __r::S3Fifo::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Opt => {
                #[allow(unused_mut)]
                let mut $p = __r::Opt::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Lfu => {
                #[allow(unused_mut)]
                let mut $p = __r::Lfu::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::LfuDa => {
                #[allow(unused_mut)]
                let mut $p = __r::LfuDa::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::LruK => {
                #[allow(unused_mut)]
                let mut $p = __r::LruK::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Random => {
                #[allow(unused_mut)]
                let mut $p = __r::Random::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Hyperbolic => {
                #[allow(unused_mut)]
                let mut $p = __r::Hyperbolic::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::LeCaR => {
                #[allow(unused_mut)]
                let mut $p = __r::LeCaR::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::WTinyLfu => {
                #[allow(unused_mut)]
                let mut $p = __r::WTinyLfu::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Lirs => {
                #[allow(unused_mut)]
                let mut $p = __r::Lirs::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::ClockPro => {
                #[allow(unused_mut)]
                let mut $p = __r::ClockPro::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Mq => {
                #[allow(unused_mut)]
                let mut $p = __r::Mq::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Car => {
                #[allow(unused_mut)]
                let mut $p = __r::Car::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Cacheus => {
                #[allow(unused_mut)]
                let mut $p = __r::Cacheus::from_spec(__capacity, &__spec);
                $body
            }
            __r::Kind::Lhd => {
                #[allow(unused_mut)]
                let mut $p = __r::Lhd::from_spec(__capacity, &__spec);
                $body
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::Kind;
    use crate::Access;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for k in Kind::ALL {
            assert_eq!(k.name().parse::<Kind>(), Ok(k));
            assert_eq!(build(k, 4).name(), k.name());
            assert_eq!(build(k, 4).capacity(), 4);
        }
        assert_eq!("Belady".parse::<Kind>(), Ok(Kind::Opt));
        assert_eq!("S3-FIFO".parse::<Kind>(), Ok(Kind::S3Fifo));
        assert_eq!("twoq".parse::<Kind>(), Ok(Kind::TwoQ));
        let err = "mru".parse::<Kind>().unwrap_err();
        assert!(err.to_string().contains("`mru`"));
        assert!(Kind::Opt.needs_oracle() && !Kind::Lru.needs_oracle());
    }

    #[test]
    fn macro_and_boxed_agree_for_every_kind() {
        // Skewed: squares of a scrambled counter favour small keys.
        let keys: Vec<u64> = (0..3000u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 7) % 97)
            .map(|r| r * r / 97)
            .collect();
        let next = crate::replacement::next_vtimes(&keys);
        let accesses: Vec<Access> = keys
            .iter()
            .enumerate()
            .map(|(t, &k)| Access { next_vtime: next[t], ..Access::read(k, t as u64) })
            .collect();
        for k in Kind::ALL {
            let mut boxed = build(k, 30);
            let a: usize = accesses.iter().filter(|x| !boxed.access(x).0).count();
            let b: usize = crate::with_replacement!(k, 30, |p| accesses
                .iter()
                .filter(|x| !p.access(x).0)
                .count());
            assert_eq!(a, b, "{k}");
            let distinct = keys.iter().collect::<std::collections::HashSet<_>>().len();
            assert!(a >= distinct, "{k}: {a} misses, fewer than the distinct keys");
            assert!(a < keys.len(), "{k}: no hits at all");
        }
    }

    /// Bytes per cached block of every policy's own structures, full at 100,000 blocks
    /// (printed with `--nocapture`; the reference page's table quotes them): each between
    /// 16 and 256.
    #[test]
    fn bytes_per_cached_block() {
        for k in Kind::ALL {
            let capacity = 100_000;
            let keys: Vec<u64> =
                (0..3 * capacity as u64).map(|i| i % (capacity as u64 + 7)).collect();
            let next = crate::replacement::next_vtimes(&keys);
            let mut p = build(k, capacity);
            for (t, &key) in keys.iter().enumerate() {
                p.access(&Access { next_vtime: next[t], ..Access::read(key, t as u64) });
            }
            let per = p.memory_bytes() as f64 / capacity as f64;
            eprintln!("{k}: {per:.1} bytes per cached block");
            assert!((16.0..=256.0).contains(&per), "{k}: {per}");
        }
    }

    /// Every policy's state is reserved at construction: a long scan of distinct keys (ten
    /// times the capacity) leaves [`Replacement::memory_bytes`] within 5 % of what a full
    /// cache reports, so history a policy keeps for non-resident blocks stays bounded.
    #[test]
    fn a_long_scan_does_not_grow_memory() {
        for k in Kind::ALL.into_iter().filter(|k| !k.needs_oracle()) {
            let capacity = 1000;
            let mut p = build(k, capacity);
            for key in 0..capacity as u64 {
                p.access(&Access::read(key, key));
            }
            let full = p.memory_bytes();
            for key in capacity as u64..11 * capacity as u64 {
                p.access(&Access::read(key, key));
            }
            let after = p.memory_bytes();
            assert!(after <= full + full / 20, "{k}: {full} bytes full, {after} after the scan");
            assert_eq!(p.len(), capacity, "{k}");
        }
    }

    /// Every policy, under random accesses and removals: the resident set implied by the
    /// reported hits, evictions and removals equals what `contains` and `len` say, and never
    /// exceeds the capacity.
    #[test]
    fn resident_set_stays_consistent_under_removals() {
        use std::collections::HashSet;
        let mut x: u64 = 0xDEAD_BEEF_CAFE_F00D;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let keys: Vec<u64> = (0..6_000).map(|_| rnd() % 300).collect();
        let next = crate::replacement::next_vtimes(&keys);
        for k in Kind::ALL {
            for capacity in [1usize, 5, 64] {
                let mut p = build(k, capacity);
                let mut resident: HashSet<u64> = HashSet::new();
                for (t, &key) in keys.iter().enumerate() {
                    if rnd() % 7 == 0 {
                        let victim = rnd() % 300;
                        assert_eq!(
                            p.remove(victim),
                            resident.remove(&victim),
                            "{k}@{capacity} t={t}"
                        );
                    }
                    let a = Access { next_vtime: next[t], ..Access::read(key, t as u64) };
                    let was = resident.contains(&key);
                    assert_eq!(p.contains(key), was, "{k}@{capacity} t={t}");
                    let (hit, evicted) = p.access(&a);
                    assert_eq!(hit, was, "{k}@{capacity} t={t}");
                    if let Some(e) = evicted {
                        assert!(resident.remove(&e), "{k}@{capacity} t={t}: evicted absent {e}");
                    }
                    resident.insert(key);
                    assert!(p.contains(key), "{k}@{capacity} t={t}: just accessed, not resident");
                    assert_eq!(p.len(), resident.len(), "{k}@{capacity} t={t}");
                    assert!(p.len() <= capacity);
                }
            }
        }
    }
}
