//! Ensemble-level versus per-volume caching (SieveStore section 5.3, the design space of
//! Figure 1): one cache shared by every volume of a trace (*ensemble*), or one partition per
//! volume of the same total size, sized in proportion to the volume's share of accesses
//! (*proportional*, the paper's iso-capacity per-server configuration) or equally (*equal*).

use crate::sievestore::{day_origin, run_sieve_with, CacheFactory, SieveRun};
use ember_policy::admission::{SieveConfigError, SieveSpec};
use ember_policy::Lru;
use ember_trace::Request;
use std::str::FromStr;

/// How a cache's capacity is divided among volumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    /// One cache for the whole ensemble.
    Ensemble,
    /// Per-volume partitions proportional to each volume's share of block accesses.
    Proportional,
    /// Equal per-volume partitions.
    Equal,
}

impl Partition {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Partition::Ensemble => "ensemble",
            Partition::Proportional => "proportional",
            Partition::Equal => "equal",
        }
    }
}

impl FromStr for Partition {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "ensemble" => Ok(Partition::Ensemble),
            "proportional" | "per-volume" => Ok(Partition::Proportional),
            "equal" => Ok(Partition::Equal),
            o => {
                Err(format!("unknown partitioning `{o}` (expected ensemble, proportional, equal)"))
            }
        }
    }
}

/// Per-volume capacities (indexed by volume id, `capacity` in total) under `mode`. Volumes
/// that never appear get nothing; [`Partition::Ensemble`] gives everything to index 0 (it is
/// not partitioned; use [`run_partitioned`]).
pub fn partition_capacities(
    requests: &[Request],
    block_size: u64,
    capacity: usize,
    mode: Partition,
) -> Vec<usize> {
    let mut weight = Vec::new();
    for r in requests {
        add_weight(&mut weight, r, block_size);
    }
    capacities_from_weights(&weight, capacity, mode)
}

/// Count `r`'s block accesses into `weight` (indexed by volume, grown on demand): the
/// weights [`capacities_from_weights`] divides the cache by.
#[inline]
pub fn add_weight(weight: &mut Vec<u64>, r: &Request, block_size: u64) {
    let v = r.volume as usize;
    if weight.len() <= v {
        weight.resize(v + 1, 0);
    }
    weight[v] += r.blocks(block_size).count() as u64;
}

/// [`partition_capacities`] from per-volume block-access counts (index = volume id; a
/// volume that never appears has 0, or lies past the end).
pub fn capacities_from_weights(weight: &[u64], capacity: usize, mode: Partition) -> Vec<usize> {
    let nvol = weight.len();
    let present: Vec<usize> = (0..nvol).filter(|&v| weight[v] > 0).collect();
    let mut caps = vec![0usize; nvol];
    if present.is_empty() {
        return caps;
    }
    match mode {
        Partition::Ensemble => caps[0] = capacity,
        Partition::Equal => {
            let n = present.len();
            for (i, &v) in present.iter().enumerate() {
                caps[v] = capacity / n + (i < capacity % n) as usize;
            }
        }
        Partition::Proportional => {
            // Largest remainder, so the partitions add up to `capacity` exactly.
            let total: u64 = weight.iter().sum();
            let mut rem: Vec<(u128, usize)> = Vec::with_capacity(present.len());
            let mut given = 0usize;
            for &v in &present {
                let exact = capacity as u128 * weight[v] as u128;
                caps[v] = (exact / total as u128) as usize;
                given += caps[v];
                rem.push((exact % total as u128, v));
            }
            rem.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            for &(_, v) in rem.iter().take(capacity - given) {
                caps[v] += 1;
            }
        }
    }
    caps
}

/// Run `spec` over `requests` with `capacity` blocks shared as `mode` says, under LRU; per-volume
/// runs each get a fresh sieve and are added up into one [`SieveRun`].
pub fn run_partitioned(
    requests: &[Request],
    block_size: u64,
    capacity: usize,
    mode: Partition,
    spec: &SieveSpec,
) -> Result<SieveRun, SieveConfigError> {
    run_partitioned_with(requests, block_size, capacity, mode, spec, &|c| Box::new(Lru::new(c)))
}

/// [`run_partitioned`] with the replacement policy made by `make_cache`.
pub fn run_partitioned_with(
    requests: &[Request],
    block_size: u64,
    capacity: usize,
    mode: Partition,
    spec: &SieveSpec,
    make_cache: CacheFactory<'_>,
) -> Result<SieveRun, SieveConfigError> {
    let origin = day_origin(requests);
    if mode == Partition::Ensemble {
        return run_sieve_with(requests, block_size, origin, capacity, spec, make_cache);
    }
    let caps = partition_capacities(requests, block_size, capacity, mode);
    let mut per_volume: Vec<Vec<Request>> = vec![Vec::new(); caps.len()];
    for r in requests {
        per_volume[r.volume as usize].push(*r);
    }
    let mut total = SieveRun { name: spec.name().to_string(), ..SieveRun::default() };
    for (v, reqs) in per_volume.iter().enumerate() {
        if reqs.is_empty() {
            continue;
        }
        let share = spec.for_partition(caps[v] as f64 / capacity.max(1) as f64);
        let run = run_sieve_with(reqs, block_size, origin, caps[v], &share, make_cache)?;
        total.merge(&run);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::Op;

    fn req(volume: u32, block: u64, time_ns: u64) -> Request {
        Request { time_ns, volume, op: Op::Read, offset: block * 4096, length: 4096 }
    }

    #[test]
    fn partitions_add_up_to_the_capacity() {
        // Volume 0: 3 accesses, volume 2: 1 access, volume 1 absent.
        let reqs = vec![req(0, 1, 0), req(0, 2, 1), req(0, 3, 2), req(2, 1, 3)];
        assert_eq!(partition_capacities(&reqs, 4096, 10, Partition::Proportional), vec![8, 0, 2]);
        assert_eq!(partition_capacities(&reqs, 4096, 9, Partition::Equal), vec![5, 0, 4]);
        assert_eq!("equal".parse::<Partition>().unwrap(), Partition::Equal);
    }

    /// SieveStore section 5.3 in miniature: two volumes whose hot blocks alternate by day;
    /// a shared cache of 2 blocks holds both hot blocks of the active volume, equal
    /// partitions of 1 block each thrash.
    #[test]
    fn ensemble_cache_follows_the_hot_volume() {
        let day = crate::sievestore::DAY_NS;
        let mut reqs = Vec::new();
        for d in 0..4u64 {
            let v = (d % 2) as u32;
            for i in 0..100u64 {
                reqs.push(req(v, i % 2, d * day + i * 1_000_000));
            }
        }
        let e = run_partitioned(&reqs, 4096, 2, Partition::Ensemble, &SieveSpec::Aod).unwrap();
        let p = run_partitioned(&reqs, 4096, 2, Partition::Equal, &SieveSpec::Aod).unwrap();
        assert_eq!(e.total().hits(), 400 - 8, "2 compulsory misses per day");
        assert_eq!(p.total().hits(), 0, "1 block per volume: the two hot blocks evict each other");
        assert!(e.total().hits() > p.total().hits());
        assert_eq!(p.capacity_blocks, 2);
    }
}
