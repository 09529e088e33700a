//! The admission sieve of a server, built from `ember_policy`'s registry ([`SieveSpec`]) with
//! the configured parameters ([`SieveSettings`]); a discrete sieve (SieveStore-D,
//! RandSieve-BlkD) is wrapped in an [`EpochAdmission`] whose epochs the engine's batch mover
//! ends.

use anyhow::{anyhow, bail};
use ember_policy::admission::{EpochAdmission, Sieve, SieveSpec, SieveStoreCConfig};
use ember_policy::Admission;

use crate::config::SieveSettings;

impl SieveSettings {
    /// `spec` with these parameters in place of its defaults.
    pub fn apply(&self, spec: SieveSpec) -> anyhow::Result<SieveSpec> {
        if !(self.fraction > 0.0 && self.fraction <= 1.0) {
            bail!("--sieve-fraction {}: above 0 and at most 1", self.fraction);
        }
        if self.epoch_ns == 0 || self.window_ns == 0 {
            bail!("--epoch and --sieve-window must be longer than 0");
        }
        if self.subwindows == 0 || self.imct == 0 {
            bail!("--sieve-subwindows and --sieve-imct must be at least 1");
        }
        let (fraction, seed, epoch_ns) = (self.fraction, self.seed, self.epoch_ns);
        Ok(match spec {
            SieveSpec::SieveStoreC(_) => SieveSpec::SieveStoreC(SieveStoreCConfig {
                t1: self.t1,
                t2: self.t2,
                window_ns: self.window_ns,
                k: self.subwindows,
                imct_entries: self.imct,
                prune_interval_ns: self.window_ns,
            }),
            SieveSpec::SieveStoreD { .. } => SieveSpec::SieveStoreD { t: self.threshold, epoch_ns },
            SieveSpec::RandSieveC { .. } => SieveSpec::RandSieveC { fraction, seed },
            SieveSpec::RandSieveBlkD { .. } => {
                SieveSpec::RandSieveBlkD { fraction, seed, epoch_ns }
            }
            SieveSpec::Ideal { .. } => SieveSpec::Ideal { fraction, epoch_ns },
            other => other,
        })
    }

    /// Parse `name` (an `--admission` value) and apply these parameters.
    pub fn spec(&self, name: &str) -> anyhow::Result<SieveSpec> {
        let spec: SieveSpec =
            name.trim().parse().map_err(|e: String| anyhow!("--admission: {e}"))?;
        self.apply(spec)
    }
}

/// The admission sieve called `s`, with `params`, and, for a discrete sieve (SieveStore-D,
/// RandSieve-BlkD), its epoch: it counts accesses (at most `count_bytes` of counts per epoch)
/// and the engine's batch mover installs its choice at each epoch's end. The ideal sieve
/// needs the future and is refused.
pub fn admission(
    s: &str,
    params: &SieveSettings,
    count_bytes: u64,
) -> anyhow::Result<(Box<dyn Admission>, Option<u64>)> {
    let spec = params.spec(s)?;
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
    fn sieve_parameters_reach_the_specs() {
        let p = SieveSettings {
            t1: 3,
            t2: 2,
            window_ns: 60_000_000_000,
            threshold: 5,
            epoch_ns: 3_600_000_000_000,
            fraction: 0.5,
            ..SieveSettings::default()
        };
        match p.spec("sievestore-c").unwrap() {
            SieveSpec::SieveStoreC(c) => {
                assert_eq!((c.t1, c.t2, c.window_ns, c.k), (3, 2, 60_000_000_000, 4))
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(
            p.spec("sievestore-d").unwrap(),
            SieveSpec::SieveStoreD { t: 5, epoch_ns: 3_600_000_000_000 }
        );
        assert_eq!(
            p.spec("randsieve-c").unwrap(),
            SieveSpec::RandSieveC { fraction: 0.5, seed: 1 }
        );
        assert_eq!(p.spec("wmna").unwrap(), SieveSpec::Wmna);
        // The defaults are the paper's.
        let d = SieveSettings::default();
        assert_eq!(d.spec("sievestore-c").unwrap(), "sievestore-c".parse::<SieveSpec>().unwrap());
        assert_eq!(d.spec("sievestore-d").unwrap(), "sievestore-d".parse::<SieveSpec>().unwrap());
        let bad = SieveSettings { fraction: 0.0, ..SieveSettings::default() };
        assert!(bad.spec("randsieve-c").is_err());
    }

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
