//! The text of `ember sim --policy help` ([`help`]): every policy's entry in the registry
//! ([`Info`](super::Info)) in words.

use super::kind::info;
use super::Kind;
use std::fmt::Write as _;

/// The text of `--policy help`: every policy with its citation, its parameters with their
/// defaults and accepted values, and how it compares with libCacheSim.
pub fn help() -> String {
    let mut s = String::from(
        "Replacement policies: --policy NAME[:PARAM=VALUE]..., several separated by commas\n\
         (e.g. --policy lru,lfuda:lcs,lruk:k=3). A bare value sets the first parameter that\n\
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
