//! The sieves' tunable parameters as plain data ([`SieveParams`]), with the papers' defaults,
//! applied to a registry entry ([`SieveParams::apply`]): what `ember sievestore`'s flags and
//! `ember serve`'s flags and config file set alike.

use serde::{Deserialize, Serialize};

use super::{
    doorkeeper, prob, randsieve_c, sievestore_d, SieveConfigError, SieveSpec, SieveStoreCConfig,
};

/// The sieves' parameters (SieveStore, ISCA 2010, sections 3.3 and 3.4), the papers'
/// defaults unless set. Each applies to the sieves that have it ([`SieveParams::spec`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SieveParams {
    /// SieveStore-C: IMCT threshold t1.
    pub t1: u32,
    /// SieveStore-C: MCT threshold t2.
    pub t2: u32,
    /// SieveStore-C: the window W in nanoseconds.
    pub window_ns: u64,
    /// SieveStore-C: sub-windows k per window.
    pub subwindows: usize,
    /// SieveStore-C: IMCT entries.
    pub imct: usize,
    /// SieveStore-D: access-count threshold t per epoch.
    pub threshold: u64,
    /// The discrete sieves' epoch in nanoseconds.
    pub epoch_ns: u64,
    /// RandSieve-C, RandSieve-BlkD and ideal: the fraction allocated.
    pub fraction: f64,
    /// RandSieve-C, RandSieve-BlkD and the probabilistic filter: the random seed.
    pub seed: u64,
    /// The probabilistic filter (`prob`): the probability of admitting a miss.
    pub probability: f64,
    /// The doorkeeper (`bloom`): blocks recorded before it is cleared (0: never).
    pub bloom_keys: u64,
    /// The doorkeeper (`bloom`): its Bloom filter's false-positive rate (0: an exact set).
    pub bloom_fpr: f64,
}

impl Default for SieveParams {
    fn default() -> Self {
        let c = SieveStoreCConfig::default();
        SieveParams {
            t1: c.t1,
            t2: c.t2,
            window_ns: c.window_ns,
            subwindows: c.k,
            imct: c.imct_entries,
            threshold: sievestore_d::DEFAULT_THRESHOLD,
            epoch_ns: sievestore_d::DEFAULT_EPOCH_NS,
            fraction: randsieve_c::DEFAULT_FRACTION,
            seed: 1,
            probability: prob::DEFAULT_PROBABILITY,
            bloom_keys: doorkeeper::DEFAULT_KEYS,
            bloom_fpr: doorkeeper::DEFAULT_FPR,
        }
    }
}

impl SieveParams {
    /// `spec` with these parameters in place of its defaults.
    pub fn apply(&self, spec: SieveSpec) -> Result<SieveSpec, SieveConfigError> {
        let name = spec.name();
        if !(self.fraction > 0.0 && self.fraction <= 1.0) {
            return Err(SieveConfigError::out_of_range(
                name,
                "fraction",
                self.fraction,
                "above 0 and at most 1",
            ));
        }
        if self.epoch_ns == 0 {
            return Err(SieveConfigError::out_of_range(name, "epoch", 0, "longer than 0"));
        }
        if self.window_ns == 0 {
            return Err(SieveConfigError::out_of_range(name, "window", 0, "longer than 0"));
        }
        if self.subwindows == 0 {
            return Err(SieveConfigError::out_of_range(name, "subwindows", 0, "at least 1"));
        }
        if self.imct == 0 {
            return Err(SieveConfigError::out_of_range(name, "imct", 0, "at least 1"));
        }
        if !(self.probability > 0.0 && self.probability <= 1.0) {
            return Err(SieveConfigError::out_of_range(
                name,
                "probability",
                self.probability,
                "above 0 and at most 1",
            ));
        }
        if !(0.0..0.5).contains(&self.bloom_fpr) {
            return Err(SieveConfigError::out_of_range(
                name,
                "bloom_fpr",
                self.bloom_fpr,
                "0..0.5",
            ));
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
            SieveSpec::Doorkeeper { .. } => {
                SieveSpec::Doorkeeper { keys: self.bloom_keys, fpr: self.bloom_fpr }
            }
            SieveSpec::Prob { .. } => SieveSpec::Prob { probability: self.probability, seed },
            SieveSpec::Cutoff { cutoff, sieve } => {
                SieveSpec::Cutoff { cutoff, sieve: Box::new(self.apply(*sieve)?) }
            }
            other => other,
        })
    }

    /// Parse `name` (an `--admission` value) and apply these parameters.
    pub fn spec(&self, name: &str) -> Result<SieveSpec, SieveConfigError> {
        let spec: SieveSpec = name.trim().parse().map_err(SieveConfigError::Unknown)?;
        self.apply(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sieve_parameters_reach_the_specs() {
        let p = SieveParams {
            t1: 3,
            t2: 2,
            window_ns: 60_000_000_000,
            threshold: 5,
            epoch_ns: 3_600_000_000_000,
            fraction: 0.5,
            ..SieveParams::default()
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
        let d = SieveParams::default();
        assert_eq!(d.spec("sievestore-c").unwrap(), "sievestore-c".parse::<SieveSpec>().unwrap());
        assert_eq!(d.spec("sievestore-d").unwrap(), "sievestore-d".parse::<SieveSpec>().unwrap());
        let bad = SieveParams { fraction: 0.0, ..SieveParams::default() };
        assert!(bad.spec("randsieve-c").is_err());
        let p = SieveParams {
            probability: 0.25,
            seed: 3,
            bloom_keys: 0,
            bloom_fpr: 0.0,
            ..SieveParams::default()
        };
        assert_eq!(p.spec("prob").unwrap(), SieveSpec::Prob { probability: 0.25, seed: 3 });
        assert_eq!(p.spec("bloom").unwrap(), SieveSpec::Doorkeeper { keys: 0, fpr: 0.0 });
        assert_eq!(d.spec("bloom").unwrap(), "bloom".parse::<SieveSpec>().unwrap());
        assert_eq!(d.spec("prob").unwrap(), "prob".parse::<SieveSpec>().unwrap());
        assert!(SieveParams { probability: 0.0, ..d.clone() }.spec("prob").is_err());
        assert!(SieveParams { bloom_fpr: 0.7, ..d }.spec("bloom").is_err());
    }
}
