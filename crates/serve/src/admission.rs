//! The admission sieve of a server, built from `ember_policy`'s registry ([`SieveSpec`]) with
//! the configured parameters ([`SieveSettings`]); a discrete sieve (SieveStore-D,
//! RandSieve-BlkD) is wrapped in an [`EpochAdmission`] whose epochs the engine's batch mover
//! ends.

use anyhow::anyhow;
use ember_policy::admission::{EpochAdmission, Sieve};
use ember_policy::Admission;

use crate::config::SieveSettings;

/// The admission sieve called `s`, with `params`, and, for a discrete sieve (SieveStore-D,
/// RandSieve-BlkD), its epoch: it counts accesses (at most `count_bytes` of counts per epoch)
/// and the engine's batch mover installs its choice at each epoch's end. The ideal sieve
/// needs the future and is refused.
pub fn admission(
    s: &str,
    params: &SieveSettings,
    count_bytes: u64,
) -> anyhow::Result<(Box<dyn Admission>, Option<u64>)> {
    let spec = params.spec(s).map_err(|e| anyhow!("--admission: {e}"))?;
    match spec.build().map_err(|e| anyhow!("--admission {s}: {e}"))? {
        Sieve::Continuous(sieve) => Ok((sieve, None)),
        Sieve::Discrete(sieve, epoch_ns) => {
            let a = EpochAdmission::new(sieve, usize::try_from(count_bytes).unwrap_or(usize::MAX))
                .map_err(|e| anyhow!("--admission {s}: {e}"))?;
            Ok((Box::new(a), Some(epoch_ns)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admissions() {
        let p = SieveSettings::default();
        let name = |s: &str| admission(s, &p, 1 << 20).map(|(a, e)| (a.name(), e)).ok();
        assert_eq!(name("aod"), Some(("aod", None)));
        assert_eq!(name("sievestore-c"), Some(("sievestore-c", None)));
        assert_eq!(name("sievestore-d"), Some(("sievestore-d", Some(86_400_000_000_000))));
        assert_eq!(name("ideal"), None, "the ideal sieve needs the future");
        assert!(admission("nope", &p, 1 << 20).is_err());
    }
}
