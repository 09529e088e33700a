//! Wong & Wilkes' two tiers in a server (docs/guide/demote.md): a client tier
//! (`--demote`) hands evicted clean blocks to its NBD backing; an array tier
//! (`--array-scheme`) manages its cache as a scheme of the paper and takes DEMOTEs.

use anyhow::{anyhow, bail};
use ember_policy::demote::{ArrayConfig, ArrayReplacement, DemoteAdmission, Scheme};
use ember_policy::Replacement;

use crate::config::TierSettings;

impl TierSettings {
    /// The array scheme asked for, checked against the replacement policy `policy` (which it
    /// replaces, so it must be the default).
    pub fn scheme(&self, policy: &str) -> anyhow::Result<Option<Scheme>> {
        let Some(s) = &self.array_scheme else { return Ok(None) };
        let scheme: Scheme = s.parse().map_err(|e| anyhow!("--array-scheme: {e}"))?;
        if policy != "lru" {
            bail!("--array-scheme {s} replaces the replacement policy: drop --policy {policy}");
        }
        Ok(Some(scheme))
    }

    /// Whether the array's sieve decides on DEMOTEs (`--demote-admission`).
    pub fn demote_admission(&self) -> anyhow::Result<DemoteAdmission> {
        self.demote_admission.parse().map_err(|e| anyhow!("--demote-admission: {e}"))
    }

    /// The DEMOTE queue's length, if the server is a client tier.
    pub fn queue(&self) -> Option<usize> {
        self.demote.then_some(self.demote_queue.max(1))
    }
}

/// The array tier's replacement policy: `scheme` over `capacity` blocks, N_segs = 10 and a
/// half-protected SLRU, aborted DEMOTEs refreshed (the simulator's defaults).
pub fn array_replacement(scheme: Scheme, capacity: usize) -> Box<dyn Replacement> {
    match ArrayReplacement::new(ArrayConfig::new(capacity, scheme)) {
        Ok(r) => Box::new(r),
        // The default layouts are valid for every scheme; fall back to plain LRU regardless.
        Err(_) => ember_policy::replacement::build(ember_policy::Kind::Lru, capacity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_and_queues() {
        let t =
            TierSettings { array_scheme: Some("demote-adapt-exp".into()), ..Default::default() };
        assert_eq!(t.scheme("lru").unwrap(), Some(Scheme::DemoteAdaptExp));
        assert_eq!(t.queue(), None);
        let e = t.scheme("arc").unwrap_err().to_string();
        assert!(e.contains("drop --policy arc"), "{e}");
        let t = TierSettings { array_scheme: Some("mru".into()), ..Default::default() };
        assert!(t.scheme("lru").unwrap_err().to_string().contains("unknown scheme"));
        let t = TierSettings { demote: true, demote_queue: 0, ..Default::default() };
        assert_eq!(t.queue(), Some(1));
        assert_eq!(t.demote_admission().unwrap(), DemoteAdmission::Sieve);
        let t = TierSettings { demote_admission: "all".into(), ..Default::default() };
        assert_eq!(t.demote_admission().unwrap(), DemoteAdmission::All);
        let t = TierSettings { demote_admission: "most".into(), ..Default::default() };
        let e = t.demote_admission().unwrap_err().to_string();
        assert!(e.contains("--demote-admission") && e.contains("sieve, all"), "{e}");
        let r = array_replacement(Scheme::Demote, 8);
        assert!(r.takes_demotes() && r.capacity() == 8 && r.name() == "demote");
        assert!(!array_replacement(Scheme::NoneLru, 8).takes_demotes());
    }
}
