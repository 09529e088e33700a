//! Whether an array's admission sieve applies to DEMOTEs: a demoted block the array does not
//! hold is one more candidate for an allocation-write (SieveStore, ISCA 2010, section 2: an
//! allocation-write is any write of a missed block into the cache), so a sieved array
//! filters it like a missed READ.
//!
//! The rule, the same in the simulator (`ember sim --deployment`) and the real array tier
//! (`ember serve --array-scheme ... --demote-admission`):
//!
//! - a DEMOTE of a block the array holds is aborted as before; the sieve is not asked (no
//!   allocation-write could follow);
//! - under [`DemoteAdmission::Sieve`] (the default), a DEMOTE of a block the array does not
//!   hold is offered to the sieve as a READ miss of that block at the DEMOTE's time
//!   ([`Admission::admit`], after [`Admission::set_occupancy`]); it is not
//!   [`Admission::observe`]d, because a DEMOTE is not a client's request for the block. A
//!   refused DEMOTE is dropped (counted `demotes_refused_sieve`); an admitted one is placed
//!   by the array's scheme, which may still abort it;
//! - under [`DemoteAdmission::All`] every DEMOTE goes to the scheme unasked (Wong & Wilkes'
//!   array, which has no sieve).
//!
//! Under AOD both rules decide alike. A sieve that counts misses in `admit` (SieveStore-C's
//! MCT, the doorkeeper) counts the DEMOTE as one.

use std::fmt;
use std::str::FromStr;

use crate::{Access, Admission};

/// Whether the array's sieve decides on DEMOTEs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemoteAdmission {
    /// A DEMOTE of an absent block is an allocation-write the sieve may refuse.
    #[default]
    Sieve,
    /// Every DEMOTE goes to the scheme; the sieve decides only on READ and write misses.
    All,
}

impl DemoteAdmission {
    /// The flag's and the config key's spelling: `sieve` or `all`.
    pub fn name(self) -> &'static str {
        match self {
            DemoteAdmission::Sieve => "sieve",
            DemoteAdmission::All => "all",
        }
    }

    /// Whether a DEMOTE of `access.key`, a block the array does not hold, may be placed:
    /// the sieve's answer under [`DemoteAdmission::Sieve`] (told the array's occupancy,
    /// `resident` of `capacity` blocks, first), always under [`DemoteAdmission::All`].
    pub fn admits(
        self,
        sieve: &mut dyn Admission,
        access: &Access,
        resident: usize,
        capacity: usize,
    ) -> bool {
        match self {
            DemoteAdmission::All => true,
            DemoteAdmission::Sieve => {
                sieve.set_occupancy(resident, capacity);
                sieve.admit(access)
            }
        }
    }
}

impl fmt::Display for DemoteAdmission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A spelling other than `sieve` or `all`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown DEMOTE admission `{0}` (known: sieve, all)")]
pub struct UnknownDemoteAdmission(pub String);

impl FromStr for DemoteAdmission {
    type Err = UnknownDemoteAdmission;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sieve" => Ok(DemoteAdmission::Sieve),
            "all" => Ok(DemoteAdmission::All),
            _ => Err(UnknownDemoteAdmission(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Aod, SieveStoreC, SieveStoreCConfig, Wmna};
    use ember_trace::Op;

    #[test]
    fn names_round_trip_and_all_ignores_the_sieve() {
        for d in [DemoteAdmission::Sieve, DemoteAdmission::All] {
            assert_eq!(d.name().parse::<DemoteAdmission>(), Ok(d));
        }
        assert!("some".parse::<DemoteAdmission>().is_err());
        assert_eq!(DemoteAdmission::default(), DemoteAdmission::Sieve);
        assert!(DemoteAdmission::Sieve.admits(&mut Aod, &Access::read(7, 0), 0, 4));
        let write = Access { op: Op::Write, ..Access::read(7, 0) };
        assert!(!Wmna.admit(&write));
        assert!(DemoteAdmission::All.admits(&mut Wmna, &write, 0, 4));
    }

    /// SieveStore-C: a DEMOTE counts as one more miss of its block. A block that needs `n`
    /// misses to pass is admitted at its `n`th whether the last is a READ miss or a DEMOTE;
    /// a first DEMOTE of a block never seen is refused under `sieve`, stored under `all`.
    #[test]
    fn a_sieve_counts_a_demote_as_a_miss() {
        let cfg = SieveStoreCConfig { t1: 2, t2: 1, ..SieveStoreCConfig::default() };
        let mut probe = SieveStoreC::new(cfg).unwrap();
        let n = (1..10).find(|_| probe.admit(&Access::read(1, 0))).unwrap();
        assert!(n > 1, "the sieve refuses a first miss");
        let mut s = SieveStoreC::new(cfg).unwrap();
        let b = Access::read(2, 0);
        for _ in 1..n {
            assert!(!s.admit(&b));
        }
        assert!(DemoteAdmission::Sieve.admits(&mut s, &b, 0, 8), "the nth miss is the DEMOTE");
        assert!(!DemoteAdmission::Sieve.admits(&mut s, &Access::read(3, 0), 0, 8));
        assert!(DemoteAdmission::All.admits(&mut s, &Access::read(4, 0), 0, 8));
    }
}
