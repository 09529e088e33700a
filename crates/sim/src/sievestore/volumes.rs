//! One cache over the volumes of a trace, each volume with the settings the real cache's
//! `[[volume]]` tables may give it apart from the cache-wide ones: write-around (the real
//! cache's write-through or write-around per volume), a sieve of its own, a sequential
//! cutoff of its own, and a share of the cache. They are composed from the policy code the
//! real cache runs (`ember_policy::admission::VolumeSieves` behind one
//! `ember_policy::seq_cutoff::SeqCutoff` with per-volume settings, behind per-volume
//! write-around; the replacement policy under `ember_policy::replacement::WithShares`), in the
//! order the real cache asks them: write policy, cutoff, sieve.

use super::metrics::SieveRun;
use super::run::run_continuous;
use ember_policy::admission::{
    CutoffAdmission, Sieve, SieveConfigError, SieveSpec, VolumeSieves, WriteAround,
};
use ember_policy::replacement::{build, Spec, WithShares};
use ember_policy::seq_cutoff::SeqCutoffConfig;
use ember_policy::shares::{ShareError, ShareLimits, Shares};
use ember_policy::{Admission, Replacement};
use ember_trace::Request;

/// The cache-wide settings.
#[derive(Clone, Debug)]
pub struct CacheSetting {
    /// The replacement policy.
    pub policy: Spec,
    /// The sieve of the volumes without one of their own.
    pub sieve: SieveSpec,
    /// The sequential cutoff of the volumes without one of their own.
    pub seq_cutoff: SeqCutoffConfig,
    /// Write misses are never allocated (the real cache's write-around).
    pub write_around: bool,
}

/// One volume's own settings (`None`: the cache-wide one).
#[derive(Clone, Debug)]
pub struct VolumeSetting {
    /// The volume's number in the trace.
    pub volume: u32,
    /// Its write misses are (`true`) or are not allocated.
    pub write_around: Option<bool>,
    /// Its own sieve.
    pub sieve: Option<SieveSpec>,
    /// Its own sequential cutoff (the stream count is the cache's).
    pub seq_cutoff: Option<SeqCutoffConfig>,
    /// Its share of the cache, in blocks.
    pub share: Option<ShareLimits>,
}

/// Why the settings cannot run.
#[derive(Debug, thiserror::Error)]
pub enum VolumeSimError {
    /// A sieve's parameters.
    #[error(transparent)]
    Sieve(#[from] SieveConfigError),
    /// A discrete sieve given to one volume (or as the cache-wide sieve here).
    #[error("{0}: a discrete sieve moves the whole cache's contents; not per volume")]
    Discrete(String),
    /// Shares that do not fit.
    #[error(transparent)]
    Shares(#[from] ShareError),
    /// Shares under a policy that cannot pick a victim under a filter.
    #[error("{0}: shares need a policy that picks its victim under a filter ({policies})", policies = WithShares::policies().join(", "))]
    NoShares(String),
}

/// A run and the blocks its cutoff kept out.
#[derive(Clone, Debug)]
pub struct VolumeRun {
    /// SieveStore's counters.
    pub run: SieveRun,
    /// Missed blocks the sequential cutoff kept out of the cache.
    pub seq_cutoff_bypasses: u64,
}

fn continuous(spec: &SieveSpec) -> Result<Box<dyn Admission>, VolumeSimError> {
    match spec.build()? {
        Sieve::Continuous(a) => Ok(a),
        Sieve::Discrete(s, _) => Err(VolumeSimError::Discrete(s.name().to_string())),
    }
}

/// Run `requests` through one cache of `capacity` blocks under `cache`, with `volumes`'
/// own settings. `origin` numbers days and minutes.
pub fn run_volumes(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    capacity: usize,
    cache: &CacheSetting,
    volumes: &[VolumeSetting],
) -> Result<VolumeRun, VolumeSimError> {
    let mut sieves = VolumeSieves::new(continuous(&cache.sieve)?);
    for v in volumes {
        if let Some(s) = &v.sieve {
            sieves.set_volume(v.volume, Some(continuous(s)?));
        }
    }
    let mut cut = CutoffAdmission::new(cache.seq_cutoff, Box::new(sieves));
    for v in volumes {
        if v.seq_cutoff.is_some() {
            cut.cutoff_mut().set_volume_config(v.volume, v.seq_cutoff);
        }
    }
    let mut seen: Vec<u32> = requests.iter().map(|r| r.volume).collect();
    seen.extend(volumes.iter().map(|v| v.volume));
    seen.sort_unstable();
    seen.dedup();
    let around: Vec<u32> = seen
        .into_iter()
        .filter(|&id| {
            let own = volumes.iter().find(|v| v.volume == id).and_then(|v| v.write_around);
            own.unwrap_or(cache.write_around)
        })
        .collect();
    let mut admission = WriteAround::new(&around, Box::new(cut));
    let mut policy: Box<dyn Replacement> = build(cache.policy, capacity);
    if volumes.iter().any(|v| v.share.is_some()) {
        let mut shares = Shares::new(capacity);
        for v in volumes {
            shares.set(v.volume, v.share)?;
        }
        let name = policy.name().to_string();
        policy =
            Box::new(WithShares::new(policy, shares).map_err(|_| VolumeSimError::NoShares(name))?);
    }
    let run = run_continuous(requests, block_size, origin, policy.as_mut(), &mut admission);
    Ok(VolumeRun { run, seq_cutoff_bypasses: admission.inner().cutoff().cut_total() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_policy::replacement::Kind;
    use ember_policy::seq_cutoff::CutoffPolicy;
    use ember_trace::Op;

    fn req(volume: u32, block: u64, op: Op) -> Request {
        Request { time_ns: 0, volume, offset: block * 4096, length: 4096, op }
    }

    fn cache() -> CacheSetting {
        CacheSetting {
            policy: Spec::from(Kind::Lru),
            sieve: "aod".parse().unwrap(),
            seq_cutoff: SeqCutoffConfig::default(),
            write_around: false,
        }
    }

    fn totals(r: &VolumeRun) -> (u64, u64) {
        let hits = r.run.days.iter().map(|d| d.read_hits + d.write_hits).sum();
        let alloc = r.run.days.iter().map(|d| d.allocation_writes).sum();
        (hits, alloc)
    }

    #[test]
    fn a_write_around_volume_allocates_no_write_miss_and_a_capped_one_keeps_to_its_share() {
        // Volume 0 writes 4 blocks, volume 1 writes 4 blocks, then both read them again.
        let mut reqs = Vec::new();
        for v in 0..2 {
            for b in 0..4 {
                reqs.push(req(v, b, Op::Write));
            }
        }
        for v in 0..2 {
            for b in 0..4 {
                reqs.push(req(v, b, Op::Read));
            }
        }
        let plain = run_volumes(&reqs, 4096, 0, 16, &cache(), &[]).unwrap();
        assert_eq!(totals(&plain), (8, 8), "every write allocated, every read a hit");
        let wa = VolumeSetting {
            volume: 1,
            write_around: Some(true),
            sieve: None,
            seq_cutoff: None,
            share: None,
        };
        let r = run_volumes(&reqs, 4096, 0, 16, &cache(), std::slice::from_ref(&wa)).unwrap();
        assert_eq!(totals(&r), (4, 8), "volume 1's reads miss, then allocate");
        let capped = VolumeSetting {
            volume: 0,
            write_around: None,
            sieve: None,
            seq_cutoff: Some(SeqCutoffConfig {
                policy: CutoffPolicy::Always,
                read_blocks: 2,
                write_blocks: 2,
                streams: 8,
            }),
            share: Some(ShareLimits { min_blocks: 0, max_blocks: 1 }),
        };
        let r = run_volumes(&reqs, 4096, 0, 16, &cache(), &[capped]).unwrap();
        assert_eq!(r.seq_cutoff_bypasses, 2 + 2, "blocks 2 and 3 of each stream are cut");
        // Volume 0 allocates blocks 0 and 1 of each stream, each evicting the other (its
        // share is one block): no hit; volume 1's reads all hit.
        assert_eq!(totals(&r), (4, 4 + 4));
    }
}
