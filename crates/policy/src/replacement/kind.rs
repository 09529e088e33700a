//! The names of ember's replacement policies ([`Kind`]) and what the registry says about each
//! ([`Info`]: aliases, the paper, the parameters declared in the policy's own file, how it
//! compares with libCacheSim). [`Spec`](super::Spec) adds parameter values;
//! [`build`](super::build) constructs a policy.

use super::params::Param;
use std::fmt;
use std::str::FromStr;

/// Every replacement policy ember implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Least recently used ([`Lru`]).
    Lru,
    /// First in, first out ([`Fifo`]).
    Fifo,
    /// CLOCK, one reference bit ([`Clock`](super::Clock)).
    Clock,
    /// SIEVE ([`Sieve`]).
    Sieve,
    /// Adaptive Replacement Cache ([`Arc`]).
    Arc,
    /// Segmented LRU, probationary + protected ([`Slru`](super::Slru)).
    Slru,
    /// 2Q, full version ([`TwoQ`](super::TwoQ)).
    TwoQ,
    /// S3-FIFO ([`S3Fifo`](super::S3Fifo)).
    S3Fifo,
    /// Belady's OPT, an oracle needing `next_vtime` ([`Opt`]).
    Opt,
    /// Least frequently used ([`Lfu`](super::Lfu)).
    Lfu,
    /// LFU with dynamic aging ([`LfuDa`](super::LfuDa)).
    LfuDa,
    /// LRU-K ([`LruK`](super::LruK)).
    LruK,
    /// Random replacement ([`Random`](super::Random)).
    Random,
    /// Hyperbolic caching ([`Hyperbolic`](super::Hyperbolic)).
    Hyperbolic,
    /// LeCaR, LRU and LFU experts weighted by regret ([`LeCaR`](super::LeCaR)).
    LeCaR,
    /// W-TinyLFU, window LRU, TinyLFU admission, SLRU main ([`WTinyLfu`](super::WTinyLfu)).
    WTinyLfu,
    /// LIRS ([`Lirs`](super::Lirs)).
    Lirs,
    /// CLOCK-Pro ([`ClockPro`](super::ClockPro)).
    ClockPro,
    /// Multi-Queue ([`Mq`](super::Mq)).
    Mq,
    /// Clock with Adaptive Replacement ([`Car`](super::Car)).
    Car,
    /// CACHEUS, SR-LRU and CR-LFU experts with an adaptive learning rate
    /// ([`Cacheus`](super::Cacheus)).
    Cacheus,
    /// LHD, least hit density by sampling ([`Lhd`](super::Lhd)).
    Lhd,
}

impl Kind {
    /// All policies, in a stable order.
    pub const ALL: [Kind; 22] = [
        Kind::Lru,
        Kind::Fifo,
        Kind::Clock,
        Kind::Sieve,
        Kind::Arc,
        Kind::Slru,
        Kind::TwoQ,
        Kind::S3Fifo,
        Kind::Opt,
        Kind::Lfu,
        Kind::LfuDa,
        Kind::LruK,
        Kind::Random,
        Kind::Hyperbolic,
        Kind::LeCaR,
        Kind::WTinyLfu,
        Kind::Lirs,
        Kind::ClockPro,
        Kind::Mq,
        Kind::Car,
        Kind::Cacheus,
        Kind::Lhd,
    ];

    /// The command-line name (`lru`, `fifo`, `clock`, `sieve`, `arc`, `slru`, `2q`, `s3fifo`,
    /// `opt`, ...).
    pub fn name(self) -> &'static str {
        info(self).name
    }

    /// The policy's parameters (empty for most).
    pub fn params(self) -> &'static [Param] {
        info(self).params
    }

    /// True if the policy reads [`crate::Access::next_vtime`] (the caller must fill it in).
    pub const fn needs_oracle(self) -> bool {
        matches!(self, Kind::Opt)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not one of [`Kind::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown replacement policy `{0}` (expected one of: {names})",
    names = Kind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;

    /// Parses a name or an alias (`belady` for OPT, `s3-fifo`, `twoq`, ...)
    /// case-insensitively. Parameters are [`Spec`]'s.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        Kind::ALL
            .into_iter()
            .find(|&k| info(k).name == t || info(k).aliases.contains(&t.as_str()))
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// A policy's entry in the registry.
#[derive(Clone, Copy, Debug)]
pub struct Info {
    /// The command-line name.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// What it is, in a few words.
    pub title: &'static str,
    /// The paper it implements.
    pub citation: &'static str,
    /// Its parameters.
    pub params: &'static [Param],
    /// How its miss counts compare with libCacheSim's (the peer tests pin it).
    pub libcachesim: &'static str,
}

/// The registry entry of `kind`.
pub fn info(kind: Kind) -> &'static Info {
    use super::*;
    match kind {
        Kind::Lru => &Info {
            name: "lru",
            aliases: &[],
            title: "least recently used",
            citation: "the classic recency order",
            params: &[],
            libcachesim: "exact (LRU)",
        },
        Kind::Fifo => &Info {
            name: "fifo",
            aliases: &[],
            title: "first in, first out",
            citation: "the classic insertion order",
            params: &[],
            libcachesim: "exact (FIFO)",
        },
        Kind::Clock => &Info {
            name: "clock",
            aliases: &[],
            title: "CLOCK, FIFO with a second chance and an n-bit counter",
            citation: "Corbató, MIT Project MAC 1968",
            params: clock::PARAMS,
            libcachesim: "exact (Clock)",
        },
        Kind::Sieve => &Info {
            name: "sieve",
            aliases: &[],
            title: "SIEVE",
            citation: "Zhang et al., NSDI 2024",
            params: &[],
            libcachesim: "exact (Sieve)",
        },
        Kind::Arc => &Info {
            name: "arc",
            aliases: &[],
            title: "ARC, the adaptive replacement cache",
            citation: "Megiddo & Modha, FAST 2003",
            params: &[],
            libcachesim: "exact (ARC)",
        },
        Kind::Slru => &Info {
            name: "slru",
            aliases: &[],
            title: "segmented LRU, probationary and protected",
            citation: "Karedla, Love & Wherry, IEEE Computer 1994; Wong & Wilkes, ATC 2002",
            params: slru::PARAMS,
            libcachesim: "exact with slru:4:lcs at capacities divisible by 4 (SLRU)",
        },
        Kind::TwoQ => &Info {
            name: "2q",
            aliases: &["twoq"],
            title: "2Q, full version (A1in, A1out, Am)",
            citation: "Johnson & Shasha, VLDB 1994",
            params: two_q::PARAMS,
            libcachesim: "exact at 4 blocks and more (TwoQ)",
        },
        Kind::S3Fifo => &Info {
            name: "s3fifo",
            aliases: &["s3-fifo"],
            title: "S3-FIFO, small, main and ghost FIFOs",
            citation: "Yang et al., SOSP 2023",
            params: s3fifo::PARAMS,
            libcachesim: "exact at 20 blocks and more (S3FIFO)",
        },
        Kind::Opt => &Info {
            name: "opt",
            aliases: &["belady"],
            title: "Belady's OPT (simulation only: it needs the future)",
            citation: "Belady, IBM Systems Journal 1966",
            params: &[],
            libcachesim: "exact (Belady)",
        },
        Kind::Lfu => &Info {
            name: "lfu",
            aliases: &[],
            title: "least frequently used, in-cache counts, FIFO among equal counts",
            citation: "the classic frequency order; O(1) buckets of Shah, Mitra & Matani 2010",
            params: &[],
            libcachesim: "exact (LFU)",
        },
        Kind::LfuDa => &Info {
            name: "lfuda",
            aliases: &["lfu-da"],
            title: "LFU with dynamic aging",
            citation: "Arlitt, Cherkasova, Dilley, Friedrich & Jin, PER 27(4) 2000, section 3",
            params: lfu_da::PARAMS,
            libcachesim: "exact with lfuda:lcs (LFUDA); the paper's form (default) differs",
        },
        Kind::LruK => &Info {
            name: "lruk",
            aliases: &["lru-k"],
            title: "LRU-K, the oldest K-th most recent access leaves",
            citation: "O'Neil, O'Neil & Weikum, SIGMOD 1993, section 2",
            params: lru_k::PARAMS,
            libcachesim: "exact at k=2 (LRUK)",
        },
        Kind::Random => &Info {
            name: "random",
            aliases: &["rand"],
            title: "random replacement, a uniform resident block leaves",
            citation: "Belady, IBM Systems Journal 1966 (RAND)",
            params: random::PARAMS,
            libcachesim: "statistical: mean over 5 seeds within max(0.5 points, 3 SE) (Random)",
        },
        Kind::Hyperbolic => &Info {
            name: "hyperbolic",
            aliases: &[],
            title: "hyperbolic caching, the lowest hits / time in cache of a sample leaves",
            citation: "Blankstein, Sen & Freedman, USENIX ATC 2017",
            params: hyperbolic::PARAMS,
            libcachesim: "statistical: mean over 5 seeds within max(0.5 points, 3 SE) (Hyperbolic)",
        },
        Kind::LeCaR => &Info {
            name: "lecar",
            aliases: &[],
            title: "LeCaR, LRU and LFU experts followed by learned weights",
            citation: "Vietri et al., HotStorage 2018",
            params: lecar::PARAMS,
            libcachesim: "statistical: mean over 5 seeds within max(0.5 points, 3 SE) (LeCaR)",
        },
        Kind::WTinyLfu => &Info {
            name: "wtinylfu",
            aliases: &["w-tinylfu", "tinylfu"],
            title: "W-TinyLFU, window LRU, TinyLFU admission by a count-min sketch, SLRU main",
            citation: "Einziger, Friedman & Manes, ACM ToS 13(4) 2017",
            params: w_tinylfu::PARAMS,
            libcachesim: "statistical: mean over 5 seeds within max(0.5 points, 3 SE) (WTinyLFU)",
        },
        Kind::Lirs => &Info {
            name: "lirs",
            aliases: &[],
            title: "LIRS, the low inter-reference recency set",
            citation: "Jiang & Zhang, SIGMETRICS 2002, section 3",
            params: lirs::PARAMS,
            libcachesim: "exact with lirs:lcs (LIRS); the paper's form (default) differs",
        },
        Kind::ClockPro => &Info {
            name: "clockpro",
            aliases: &["clock-pro"],
            title: "CLOCK-Pro, hot and cold pages with test periods on one clock",
            citation: "Jiang, Chen & Zhang, USENIX ATC 2005, sections 3 and 4",
            params: clock_pro::PARAMS,
            libcachesim: "differs from ClockPro, which departs from the paper; exact against a \
                          reference from the paper",
        },
        Kind::Mq => &Info {
            name: "mq",
            aliases: &["multiqueue", "multi-queue"],
            title: "Multi-Queue, LRU queues by access count with expiry and a history Qout",
            citation: "Zhou, Philbin & Li, USENIX ATC 2001, section 4",
            params: mq::PARAMS,
            libcachesim: "exact with mq:lcs (MQ); the paper's order of a miss (default) differs",
        },
        Kind::Car => &Info {
            name: "car",
            aliases: &[],
            title: "CAR, clock with adaptive replacement (ARC over two clocks)",
            citation: "Bansal & Modha, FAST 2004, figure 2",
            params: &[],
            libcachesim: "not in libcachesim 0.3.x; exact against a reference from the paper",
        },
        Kind::Cacheus => &Info {
            name: "cacheus",
            aliases: &[],
            title: "CACHEUS, SR-LRU and CR-LFU experts, regret weights, adaptive learning rate",
            citation: "Rodriguez et al., FAST 2021, sections 4 and 5",
            params: cacheus::PARAMS,
            libcachesim: "statistical with cacheus:lcs: mean over 5 seeds within 0.75 points of \
                          Cacheus's mean over 5 runs (it misses 0.25-0.56 points more); the \
                          paper's form (default) differs",
        },
        Kind::Lhd => &Info {
            name: "lhd",
            aliases: &[],
            title: "LHD, least hit density among sampled blocks, densities by class and age",
            citation: "Beckmann, Chen & Cidon, NSDI 2018, sections 3 to 5",
            params: lhd::PARAMS,
            libcachesim: "statistical: mean over 5 seeds within max(0.5 points, 3 SE) (LHD)",
        },
    }
}
