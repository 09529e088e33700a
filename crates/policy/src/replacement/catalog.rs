//! What the registry says about each policy: its name and aliases, the paper it implements,
//! its parameters (declared in the policy's own file), and how it compares with libCacheSim.
//! `ember sim --policy help` prints it ([`help`]).

use super::params::Param;
use super::Kind;
use std::fmt::Write as _;

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
    }
}

/// The text of `--policy help`: every policy with its citation, its parameters with their
/// defaults and accepted values, and how it compares with libCacheSim.
pub fn help() -> String {
    let mut s = String::from(
        "Replacement policies: --policy NAME[:PARAM=VALUE]..., several separated by commas\n\
         (e.g. --policy lru,lirs:hir=2%,lruk:k=3). A bare value sets the first parameter that\n\
         takes it (slru:4:lcs is slru:segments=4:insert=lcs).\n",
    );
    for kind in Kind::ALL {
        let i = info(kind);
        let _ = write!(s, "\n{}  {} ({})", i.name, i.title, i.citation);
        if !i.aliases.is_empty() {
            let _ = write!(s, "; also {}", i.aliases.join(", "));
        }
        let _ = writeln!(s, "\n    libCacheSim: {}", i.libcachesim);
        for p in i.params {
            let _ = writeln!(
                s,
                "    {}={}  ({}) {}",
                p.name,
                p.format(p.default),
                p.accepted(),
                p.help
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_has_an_entry_named_as_its_kind() {
        let h = help();
        for k in Kind::ALL {
            assert_eq!(info(k).name, k.name());
            assert!(!info(k).citation.is_empty());
            assert!(h.contains(&format!("\n{}  ", k.name())), "{k} missing from help");
            for p in k.params() {
                assert!(h.contains(&format!("    {}=", p.name)), "{k}: {} missing", p.name);
                assert!(p.parse(&p.format(p.default)).is_ok(), "{k}: {} default", p.name);
            }
            assert!(k.params().len() <= super::super::spec::MAX_PARAMS);
        }
    }
}
