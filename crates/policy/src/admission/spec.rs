//! The registry of SieveStore's sieves (Pritchett and Thottethodi, ISCA 2010, sections 3 and
//! 5.1), OCF's nhit promotion and libCacheSim's admission filters (the doorkeeper and the
//! probabilistic filter): each by its command-line name with the paper's (or the peer's)
//! defaults, and [`SieveSpec::build`] making a fresh instance of either kind ([`Sieve`]). The
//! simulator (`ember sievestore`) and the real cache (`ember serve --admission`) both build
//! their sieves here.
//!
//! Defaults: SieveStore-C t1 = 9, t2 = 4, W = 8 h, k = 4 ([`SieveStoreCConfig`]);
//! SieveStore-D t = 10 over an epoch of one day; RandSieve-C, RandSieve-BlkD and the ideal
//! sieve 1 %; OCF nhit as [`OcfNhitConfig::default`]; the doorkeeper 2^20 blocks at a 1 %
//! false-positive rate; the probabilistic filter 0.5 (libCacheSim's).

use super::sievestore_d::DEFAULT_EPOCH_NS;
use super::CutoffAdmission;
use super::{
    doorkeeper, prob, Aod, Doorkeeper, Ideal, OcfNhit, OcfNhitConfig, Probabilistic, RandSieveBlkD,
    RandSieveC, Sieve, SieveConfigError, SieveStoreC, SieveStoreCConfig, SieveStoreD, Wmna,
};
use crate::seq_cutoff::SeqCutoffConfig;
use std::str::FromStr;

/// Which sieve to run, with its parameters; [`SieveSpec::build`] makes a fresh instance (one
/// per cache or partition).
#[derive(Clone, Debug, PartialEq)]
pub enum SieveSpec {
    /// Allocate on every miss.
    Aod,
    /// Allocate on read misses.
    Wmna,
    /// SieveStore-C (IMCT + MCT).
    SieveStoreC(SieveStoreCConfig),
    /// SieveStore-D: threshold `t` per epoch of `epoch_ns`.
    SieveStoreD {
        /// Access-count threshold.
        t: u64,
        /// Epoch length.
        epoch_ns: u64,
    },
    /// RandSieve-C: allocate a random `fraction` of misses.
    RandSieveC {
        /// Fraction of misses allocated.
        fraction: f64,
        /// Random seed.
        seed: u64,
    },
    /// RandSieve-BlkD: a random `fraction` of each epoch's blocks.
    RandSieveBlkD {
        /// Fraction of distinct blocks chosen.
        fraction: f64,
        /// Random seed.
        seed: u64,
        /// Epoch length.
        epoch_ns: u64,
    },
    /// The ideal sieve: each epoch's top `fraction` of blocks, known in advance.
    Ideal {
        /// Fraction of distinct blocks kept.
        fraction: f64,
        /// Epoch length.
        epoch_ns: u64,
    },
    /// OCF's nhit promotion.
    OcfNhit(OcfNhitConfig),
    /// The doorkeeper: admit a block on its second miss ([`Doorkeeper`]).
    Doorkeeper {
        /// Blocks recorded before the filter is cleared (0: never).
        keys: u64,
        /// The Bloom filter's false-positive rate (0: an exact set).
        fpr: f64,
    },
    /// The probabilistic filter: admit a miss with `probability` ([`Probabilistic`]).
    Prob {
        /// The probability of admitting a miss.
        probability: f64,
        /// The generator's seed (1: libCacheSim's).
        seed: u64,
    },
    /// A per-miss sieve behind a sequential cutoff ([`super::CutoffAdmission`]):
    /// how the simulator runs `--seq-cutoff`. Named as its sieve.
    Cutoff {
        /// The cutoff's settings.
        cutoff: SeqCutoffConfig,
        /// The sieve behind it (a per-miss one).
        sieve: Box<SieveSpec>,
    },
}

impl SieveSpec {
    /// Every name [`SieveSpec::from_str`] takes (without aliases), in the order of the
    /// registry's documentation.
    pub const NAMES: [&'static str; 10] = [
        "aod",
        "wmna",
        "sievestore-c",
        "sievestore-d",
        "randsieve-c",
        "randsieve-blkd",
        "ideal",
        "ocf-nhit",
        "bloom",
        "prob",
    ];

    /// Every sieve with the paper's parameters, in the order of SieveStore Figure 5 (ideal,
    /// RandSieve-BlkD, SieveStore-D, RandSieve-C, SieveStore-C, AOD, WMNA), then OCF nhit.
    pub fn all() -> Vec<SieveSpec> {
        [
            "ideal",
            "randsieve-blkd",
            "sievestore-d",
            "randsieve-c",
            "sievestore-c",
            "aod",
            "wmna",
            "ocf-nhit",
        ]
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect()
    }

    /// The command-line name.
    pub fn name(&self) -> &'static str {
        match self {
            SieveSpec::Aod => "aod",
            SieveSpec::Wmna => "wmna",
            SieveSpec::SieveStoreC(_) => "sievestore-c",
            SieveSpec::SieveStoreD { .. } => "sievestore-d",
            SieveSpec::RandSieveC { .. } => "randsieve-c",
            SieveSpec::RandSieveBlkD { .. } => "randsieve-blkd",
            SieveSpec::Ideal { .. } => "ideal",
            SieveSpec::OcfNhit(_) => "ocf-nhit",
            SieveSpec::Doorkeeper { .. } => "bloom",
            SieveSpec::Prob { .. } => "prob",
            SieveSpec::Cutoff { sieve, .. } => sieve.name(),
        }
    }

    /// True for sieves that choose what to allocate (everything but AOD and WMNA).
    pub fn is_sieved(&self) -> bool {
        !matches!(self, SieveSpec::Aod | SieveSpec::Wmna)
    }

    /// The same sieve sized for a partition holding `fraction` (0..=1) of the cache: the
    /// fixed-size tables (SieveStore-C's IMCT, OCF's nhit hash, the doorkeeper's filter)
    /// shrink in proportion (to at least 1024 entries), so per-volume partitions together use
    /// the memory of one ensemble sieve.
    pub fn for_partition(&self, fraction: f64) -> SieveSpec {
        let scale = |n: usize| ((n as f64 * fraction.clamp(0.0, 1.0)).round() as usize).max(1024);
        match self {
            SieveSpec::SieveStoreC(c) => SieveSpec::SieveStoreC(SieveStoreCConfig {
                imct_entries: scale(c.imct_entries).min(c.imct_entries),
                ..*c
            }),
            SieveSpec::OcfNhit(c) => SieveSpec::OcfNhit(OcfNhitConfig {
                hash_entries: scale(c.hash_entries).min(c.hash_entries),
                ..*c
            }),
            SieveSpec::Doorkeeper { keys, fpr } if *keys > 0 => {
                SieveSpec::Doorkeeper { keys: (scale(*keys as usize) as u64).min(*keys), fpr: *fpr }
            }
            SieveSpec::Cutoff { cutoff, sieve } => SieveSpec::Cutoff {
                cutoff: *cutoff,
                sieve: Box::new(sieve.for_partition(fraction)),
            },
            other => other.clone(),
        }
    }

    /// This sieve behind the sequential cutoff `cutoff`, or itself when the cutoff is off.
    pub fn with_cutoff(self, cutoff: SeqCutoffConfig) -> SieveSpec {
        if cutoff.is_active() {
            SieveSpec::Cutoff { cutoff, sieve: Box::new(self) }
        } else {
            self
        }
    }

    /// A fresh instance.
    pub fn build(&self) -> Result<Sieve, SieveConfigError> {
        Ok(match self {
            SieveSpec::Aod => Sieve::Continuous(Box::new(Aod)),
            SieveSpec::Wmna => Sieve::Continuous(Box::new(Wmna)),
            SieveSpec::SieveStoreC(c) => Sieve::Continuous(Box::new(SieveStoreC::new(*c)?)),
            SieveSpec::RandSieveC { fraction, seed } => {
                Sieve::Continuous(Box::new(RandSieveC::new(*fraction, *seed)?))
            }
            SieveSpec::OcfNhit(c) => Sieve::Continuous(Box::new(OcfNhit::new(*c)?)),
            SieveSpec::Doorkeeper { keys, fpr } => {
                Sieve::Continuous(Box::new(Doorkeeper::new(*keys, *fpr)?))
            }
            SieveSpec::Prob { probability, seed } => {
                Sieve::Continuous(Box::new(Probabilistic::new(*probability, *seed)?))
            }
            SieveSpec::SieveStoreD { t, epoch_ns } => {
                Sieve::Discrete(Box::new(SieveStoreD::new(*t)?), check_epoch(*epoch_ns)?)
            }
            SieveSpec::RandSieveBlkD { fraction, seed, epoch_ns } => Sieve::Discrete(
                Box::new(RandSieveBlkD::new(*fraction, *seed)?),
                check_epoch(*epoch_ns)?,
            ),
            SieveSpec::Ideal { fraction, epoch_ns } => {
                Sieve::Discrete(Box::new(Ideal::new(*fraction)?), check_epoch(*epoch_ns)?)
            }
            SieveSpec::Cutoff { cutoff, sieve } => match sieve.build()? {
                Sieve::Continuous(a) => {
                    Sieve::Continuous(Box::new(CutoffAdmission::new(*cutoff, a)))
                }
                Sieve::Discrete(..) => {
                    return Err(SieveConfigError::Unknown(format!(
                        "{}: a discrete sieve allocates a batch at each epoch's end; the \
                         sequential cutoff needs a per-miss sieve",
                        sieve.name()
                    )))
                }
            },
        })
    }
}

/// An epoch of at least a second (a day in the paper; seconds let tests replay several
/// epochs live; a batch's moves are spread over the minutes its epoch covers, at least one).
fn check_epoch(epoch_ns: u64) -> Result<u64, SieveConfigError> {
    if epoch_ns < 1_000_000_000 {
        return Err(SieveConfigError::out_of_range("epoch", "epoch_ns", epoch_ns, ">= 1 second"));
    }
    Ok(epoch_ns)
}

impl FromStr for SieveSpec {
    type Err = String;

    /// `aod`, `wmna`, `sievestore-c`, `sievestore-d`, `randsieve-c`, `randsieve-blkd`,
    /// `ideal`, `ocf-nhit`, `bloom` (also `bloomfilter`, `doorkeeper`), `prob` (also
    /// `probabilistic`), each with the paper's (or the peer's) defaults.
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "aod" => SieveSpec::Aod,
            "wmna" => SieveSpec::Wmna,
            "sievestore-c" | "ssc" => SieveSpec::SieveStoreC(SieveStoreCConfig::default()),
            "sievestore-d" | "ssd" => SieveSpec::SieveStoreD { t: 10, epoch_ns: DEFAULT_EPOCH_NS },
            "randsieve-c" => SieveSpec::RandSieveC { fraction: 0.01, seed: 1 },
            "randsieve-blkd" => {
                SieveSpec::RandSieveBlkD { fraction: 0.01, seed: 1, epoch_ns: DEFAULT_EPOCH_NS }
            }
            "ideal" => SieveSpec::Ideal { fraction: 0.01, epoch_ns: DEFAULT_EPOCH_NS },
            "ocf-nhit" | "nhit" => SieveSpec::OcfNhit(OcfNhitConfig::default()),
            "bloom" | "bloomfilter" | "doorkeeper" => SieveSpec::Doorkeeper {
                keys: doorkeeper::DEFAULT_KEYS,
                fpr: doorkeeper::DEFAULT_FPR,
            },
            "prob" | "probabilistic" => {
                SieveSpec::Prob { probability: prob::DEFAULT_PROBABILITY, seed: 1 }
            }
            other => {
                return Err(format!(
                    "unknown admission policy `{other}` (expected {})",
                    SieveSpec::NAMES.join(", ")
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_sieves_share_the_imct() {
        let s: SieveSpec = "sievestore-c".parse().unwrap();
        match s.for_partition(0.25) {
            SieveSpec::SieveStoreC(c) => assert_eq!(c.imct_entries, 1 << 16),
            other => panic!("{other:?}"),
        }
        match s.for_partition(0.0) {
            SieveSpec::SieveStoreC(c) => assert_eq!(c.imct_entries, 1024),
            other => panic!("{other:?}"),
        }
        assert_eq!(SieveSpec::Aod.for_partition(0.5), SieveSpec::Aod);
    }

    #[test]
    fn parses_every_sieve_name() {
        assert_eq!(SieveSpec::all().len(), 8);
        for s in SieveSpec::all() {
            assert_eq!(s.name().parse::<SieveSpec>().unwrap(), s);
        }
        for n in SieveSpec::NAMES {
            let s: SieveSpec = n.parse().unwrap();
            assert_eq!(s.name(), n);
            assert!(s.build().is_ok(), "{n}");
        }
        assert_eq!("BloomFilter".parse::<SieveSpec>().unwrap().name(), "bloom");
        assert_eq!("probabilistic".parse::<SieveSpec>().unwrap().name(), "prob");
        let e = "lru".parse::<SieveSpec>().unwrap_err();
        assert!(e.contains("bloom, prob"), "{e}");
    }

    #[test]
    fn the_doorkeeper_shrinks_with_its_partition() {
        let s: SieveSpec = "bloom".parse().unwrap();
        assert_eq!(
            s.for_partition(0.5),
            SieveSpec::Doorkeeper { keys: doorkeeper::DEFAULT_KEYS / 2, fpr: 0.01 }
        );
        let exact = SieveSpec::Doorkeeper { keys: 0, fpr: 0.0 };
        assert_eq!(exact.for_partition(0.5), exact);
    }
}
