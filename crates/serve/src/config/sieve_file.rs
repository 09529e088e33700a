//! The sieves' parameters as the config file writes them (`[live.sieve]`: `t1`, `t2`,
//! `window = "8h"`, `subwindows`, `imct`, `threshold`, `epoch = "1d"`, `fraction`, `seed`,
//! `probability`, `bloom-keys`, `bloom-fpr`),
//! a serde adapter for `ember_policy`'s `SieveParams`, whose durations are nanoseconds.

use ember_policy::admission::SieveParams;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::units;

#[derive(Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
struct SieveFile {
    t1: u32,
    t2: u32,
    #[serde(with = "units::nanos")]
    window: u64,
    subwindows: usize,
    imct: usize,
    threshold: u64,
    #[serde(with = "units::nanos")]
    epoch: u64,
    fraction: f64,
    seed: u64,
    probability: f64,
    bloom_keys: u64,
    bloom_fpr: f64,
}

impl Default for SieveFile {
    fn default() -> Self {
        SieveFile::from(&SieveParams::default())
    }
}

impl From<&SieveParams> for SieveFile {
    fn from(p: &SieveParams) -> Self {
        SieveFile {
            t1: p.t1,
            t2: p.t2,
            window: p.window_ns,
            subwindows: p.subwindows,
            imct: p.imct,
            threshold: p.threshold,
            epoch: p.epoch_ns,
            fraction: p.fraction,
            seed: p.seed,
            probability: p.probability,
            bloom_keys: p.bloom_keys,
            bloom_fpr: p.bloom_fpr,
        }
    }
}

pub fn serialize<S: Serializer>(p: &SieveParams, s: S) -> Result<S::Ok, S::Error> {
    SieveFile::from(p).serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SieveParams, D::Error> {
    let f = SieveFile::deserialize(d)?;
    Ok(SieveParams {
        t1: f.t1,
        t2: f.t2,
        window_ns: f.window,
        subwindows: f.subwindows,
        imct: f.imct,
        threshold: f.threshold,
        epoch_ns: f.epoch,
        fraction: f.fraction,
        seed: f.seed,
        probability: f.probability,
        bloom_keys: f.bloom_keys,
        bloom_fpr: f.bloom_fpr,
    })
}
