//! A realistic storage-ensemble workload (`ember trace gen ensemble`): many volumes of an
//! MSR-Cambridge-like data centre over several days, with the properties SieveStore section 2
//! measured on the real traces:
//!
//! - **extreme popularity skew** (observation O1): each day, about 1 % of the blocks touched
//!   (each volume's *hot set*) draws most accesses, about half the blocks are touched exactly
//!   once, and most others only 2–4 times;
//! - **skew that differs between volumes** (O2, Figure 3(a),(b)): a web proxy (`prxy`) sends
//!   nearly everything to a small hot set, a source-control server (`src1`) is close to
//!   uniform;
//! - **skew and load that vary in time** (Figure 3(c),(d)): each volume's share of the day's
//!   traffic and the share going to its hot set change from day to day, so the top 1 % of the
//!   ensemble is made of different volumes on different days;
//! - **a hot set that drifts**: each day a fraction of every hot set is replaced by new blocks,
//!   so consecutive days overlap but are not equal.
//!
//! Volumes are named as in the MSR-Cambridge traces (`prxy_0`, `src1_2`, ...), times are
//! nanoseconds since the Unix epoch, and calendar days start at midnight UTC, so the trace
//! can be written in MSR CSV and read back. Within a day each volume has its own bursty
//! hour-by-hour load. Everything is drawn from one seed.

use crate::{Op, Request, Trace, TraceError, VolumeTable};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// One day in nanoseconds.
pub const DAY_NS: u64 = 86_400_000_000_000;

/// One hour in nanoseconds.
const HOUR_NS: u64 = 3_600_000_000_000;

/// Scale of the per-kind Zipf exponents: a flatter hot set than pure Zipf(1), so much of the
/// hot traffic goes to blocks with tens of accesses a day (SieveStore Figure 2(a)).
const ZIPF_SCALE: f64 = 1.0;

/// Scale of the per-kind hot shares.
const HOT_SCALE: f64 = 0.85;

/// Expected daily accesses of the least popular block of a hot set.
const TAIL_COUNT: f64 = 10.0;

/// Share of cold (non-hot) accesses that go to blocks touched exactly once. With the rest
/// going to blocks touched 3 times on average, once-touched blocks are about half of all.
const ONCE_SHARE: f64 = 0.27;

/// 2007-02-22 00:00:00 UTC, the first calendar day of the MSR-Cambridge traces, in ns.
pub const MSR_START_NS: u64 = 1_172_102_400_000_000_000;

/// The 36 volumes of the MSR-Cambridge traces (SieveStore Table 1), ordered so that any prefix
/// mixes server kinds.
pub const MSR_VOLUMES: [&str; 36] = [
    "prxy_0", "src1_2", "web_0", "usr_0", "proj_0", "hm_0", "stg_0", "mds_0", "wdev_0", "rsrch_0",
    "prn_0", "ts_0", "src2_0", "web_1", "prxy_1", "src1_0", "usr_1", "proj_1", "hm_1", "stg_1",
    "mds_1", "wdev_1", "rsrch_1", "prn_1", "src2_1", "web_2", "src1_1", "usr_2", "proj_2",
    "wdev_2", "rsrch_2", "src2_2", "web_3", "proj_3", "wdev_3", "proj_4",
];

/// The access character of one server kind: (share of its accesses that go to its hot set,
/// Zipf exponent within the hot set, read fraction, relative traffic weight).
fn server_kind(volume: &str) -> (f64, f64, f64, f64) {
    let server = volume.split('_').next().unwrap_or(volume);
    match server {
        "prxy" => (0.92, 1.2, 0.35, 3.0),
        "src1" => (0.2, 0.5, 0.6, 2.0),
        "web" => (0.75, 1.0, 0.7, 1.0),
        "usr" => (0.7, 0.9, 0.8, 1.5),
        "proj" => (0.55, 0.8, 0.7, 2.0),
        "hm" => (0.8, 1.0, 0.4, 0.7),
        "stg" => (0.65, 1.0, 0.5, 0.5),
        "mds" => (0.5, 0.8, 0.6, 0.4),
        "wdev" => (0.75, 1.1, 0.3, 0.4),
        "rsrch" => (0.7, 1.0, 0.3, 0.5),
        "prn" => (0.6, 0.9, 0.4, 0.8),
        "ts" => (0.7, 1.0, 0.4, 0.3),
        "src2" => (0.5, 0.8, 0.6, 0.8),
        _ => (0.5, 1.0, 0.6, 1.0),
    }
}

/// Parameters of the ensemble generator.
#[derive(Clone, Debug, PartialEq)]
pub struct EnsembleConfig {
    /// Volume names (MSR `host_disk` style); the server kind is the part before `_`.
    pub volumes: Vec<String>,
    /// Calendar days.
    pub days: u32,
    /// Block accesses per day over the whole ensemble (on average; volumes vary by day).
    pub accesses_per_day: u64,
    /// Start of the first day, ns since the Unix epoch (should be a midnight UTC).
    pub start_ns: u64,
    /// Fraction of each hot set replaced by new blocks from one day to the next.
    pub drift: f64,
    /// Block size in bytes (request offsets and lengths are multiples of it).
    pub block_size: u64,
    /// Blocks per volume (the address space hot and cold blocks are drawn from).
    pub volume_blocks: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for EnsembleConfig {
    /// All 36 MSR volumes, 4 days, 2 million block accesses a day, 15 % daily drift, 4 KiB
    /// blocks, 64 GiB volumes.
    fn default() -> Self {
        Self::with_volumes(36)
    }
}

impl EnsembleConfig {
    /// The default configuration restricted to the first `n` (at most 36) MSR volume names.
    pub fn with_volumes(n: usize) -> Self {
        Self {
            volumes: MSR_VOLUMES.iter().take(n.min(36)).map(|s| s.to_string()).collect(),
            days: 4,
            accesses_per_day: 2_000_000,
            start_ns: MSR_START_NS,
            drift: 0.15,
            block_size: 4096,
            volume_blocks: 1 << 24,
            seed: 1,
        }
    }

    fn validate(&self) -> Result<(), TraceError> {
        let bad = |m: &str| Err(TraceError::Invalid(format!("gen ensemble: {m}")));
        if self.volumes.is_empty() {
            return bad("at least one volume is needed");
        }
        if self.volumes.len() > u16::MAX as usize {
            return bad("at most 65535 volumes");
        }
        if self.days == 0 {
            return bad("days must be at least 1");
        }
        if self.accesses_per_day == 0 {
            return bad("accesses per day must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.drift) {
            return bad("drift must be within 0..=1");
        }
        if self.block_size == 0 || self.block_size > u32::MAX as u64 / 64 {
            return bad("block size must be within 1..=64 MiB");
        }
        if self.volume_blocks < 1024 {
            return bad("volumes must have at least 1024 blocks");
        }
        Ok(())
    }
}

/// Per-volume state carried across days.
struct Volume {
    hot_share: f64,
    zipf_s: f64,
    read_fraction: f64,
    weight: f64,
    hot: Vec<u64>,
}

/// A log-normal factor with median 1 and log-standard-deviation `sigma`.
fn lognormal(rng: &mut Xoshiro256PlusPlus, sigma: f64) -> f64 {
    // Box-Muller.
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (sigma * z).exp()
}

/// Generate the ensemble trace: requests sorted by time, volumes named as configured
/// ([`EnsembleStream`] collected).
pub fn generate(cfg: &EnsembleConfig) -> Result<Trace, TraceError> {
    let mut s = EnsembleStream::new(cfg)?;
    let table = s.volumes().clone();
    let mut requests = Vec::with_capacity((cfg.accesses_per_day * cfg.days as u64) as usize);
    requests.extend(&mut s);
    Ok(Trace::new(requests, table))
}

/// The ensemble trace, generated a day at a time: each day's requests are drawn, sorted by
/// (time, volume, offset) and handed out before the next day is drawn. Days do not overlap
/// in time, so this is the order of the whole trace sorted at once. Memory: one day's
/// requests (about `accesses_per_day`, 32 bytes each) and the volumes' hot sets, whatever
/// the number of days.
pub struct EnsembleStream {
    cfg: EnsembleConfig,
    rng: Xoshiro256PlusPlus,
    table: VolumeTable,
    vols: Vec<Volume>,
    day: u64,
    today: Vec<Request>,
    pos: usize,
}

impl std::fmt::Debug for EnsembleStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnsembleStream").field("day", &self.day).finish_non_exhaustive()
    }
}

impl EnsembleStream {
    /// The stream of `cfg`, or why `cfg` is invalid.
    pub fn new(cfg: &EnsembleConfig) -> Result<Self, TraceError> {
        cfg.validate()?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
        let mut table = VolumeTable::new();
        let n = cfg.volumes.len();
        // Static per-volume character, jittered so volumes of one server differ too (Figure
        // 3(b)).
        let mut vols: Vec<Volume> = Vec::with_capacity(n);
        for name in &cfg.volumes {
            table.intern(name);
            let (h, s, r, w) = server_kind(name);
            vols.push(Volume {
                hot_share: (h * HOT_SCALE * rng.gen_range(0.8..1.2)).min(0.95),
                zipf_s: s * ZIPF_SCALE * rng.gen_range(0.9..1.1),
                read_fraction: r,
                weight: w * lognormal(&mut rng, 0.3),
                hot: Vec::new(),
            });
        }
        Ok(Self { cfg: cfg.clone(), rng, table, vols, day: 0, today: Vec::new(), pos: 0 })
    }

    /// The volume table (ids in the order of the configuration's volumes).
    pub fn volumes(&self) -> &VolumeTable {
        &self.table
    }

    /// Draw day `self.day` into `today`, sorted.
    fn draw_day(&mut self) {
        let Self { cfg, rng, vols, today, day, .. } = self;
        let rng = &mut *rng;
        let day = *day;
        today.clear();
        let bs = cfg.block_size;
        let day_start = cfg.start_ns + day * DAY_NS;
        // Today's traffic shares and hot shares vary by volume (Figure 3(c),(d)).
        let day_weights: Vec<f64> = vols.iter().map(|v| v.weight * lognormal(rng, 0.9)).collect();
        let day_total: f64 = day_weights.iter().sum();
        for (vi, v) in vols.iter_mut().enumerate() {
            if day > 0 {
                // Drift: replace a fraction of the hot set with new blocks; the hottest ranks
                // (metadata, logs) are the most stable, the tail the least, `drift` on average
                // over the hot set.
                let n = v.hot.len().max(1) as f64;
                for (rank, b) in v.hot.iter_mut().enumerate() {
                    let p = cfg.drift * (0.25 + 1.5 * rank as f64 / n);
                    if rng.gen::<f64>() < p {
                        *b = rng.gen_range(0..cfg.volume_blocks);
                    }
                }
            }
            let accesses =
                (cfg.accesses_per_day as f64 * day_weights[vi] / day_total).round() as u64;
            let hot_share = (v.hot_share * rng.gen_range(0.6..1.3)).min(0.97);
            let hot_accesses = (accesses as f64 * hot_share).round() as u64;
            // Today's hot set: Zipf(s) ranks down to the one expecting about TAIL_COUNT
            // accesses (SieveStore Figure 2(a): the top 1 % bin's blocks see about 10 a day).
            // Its size follows the day's load and hot share, so it varies in time (Figure
            // 3(c)). New ranks take new blocks.
            let mut active = 0usize;
            let mut wsum = 0.0;
            loop {
                let w = ((active + 1) as f64).powf(-v.zipf_s);
                if active > 0 && hot_accesses as f64 * w / (wsum + w) < TAIL_COUNT {
                    break;
                }
                wsum += w;
                active += 1;
                if active >= 1 << 22 {
                    break;
                }
            }
            while v.hot.len() < active {
                v.hot.push(rng.gen_range(0..cfg.volume_blocks));
            }
            let cold_accesses = accesses - hot_accesses;
            // Hour-by-hour load of this volume's cold traffic today: bursty (scans, backups,
            // builds), while its hot blocks are accessed steadily through the day. Cold bursts
            // are what pollutes an unsieved cache.
            let hours: Vec<f64> = (0..24).map(|_| lognormal(rng, 1.5)).collect();
            let hour_total: f64 = hours.iter().sum();
            let mut cum = Vec::with_capacity(24);
            let mut acc = 0.0;
            for h in &hours {
                acc += h / hour_total;
                cum.push(acc);
            }
            let volume = vi as u32;
            let read_fraction = v.read_fraction;
            let mut emit = |rng: &mut Xoshiro256PlusPlus, block: u64, blocks: u64, bursty: bool| {
                let u: f64 = rng.gen();
                let hour = if bursty {
                    cum.partition_point(|&c| c < u).min(23) as u64
                } else {
                    rng.gen_range(0..24)
                };
                let time_ns = day_start + hour * HOUR_NS + rng.gen_range(0..HOUR_NS);
                let op = if rng.gen::<f64>() < read_fraction { Op::Read } else { Op::Write };
                let block = block.min(cfg.volume_blocks - blocks);
                today.push(Request {
                    time_ns,
                    volume,
                    op,
                    offset: block * bs,
                    length: (blocks * bs) as u32,
                });
            };
            // Hot accesses: Zipf(s) over the hot set's ranks, counts by stochastic rounding of
            // their expectations.
            let weights: Vec<f64> = (1..=active).map(|r| (r as f64).powf(-v.zipf_s)).collect();
            for (rank, &b) in v.hot[..active].iter().enumerate() {
                let expect = hot_accesses as f64 * weights[rank] / wsum;
                let mut k = expect.floor() as u64;
                if rng.gen::<f64>() < expect - expect.floor() {
                    k += 1;
                }
                for _ in 0..k {
                    emit(rng, b, 1, false);
                }
            }
            // Cold accesses: most to blocks touched 2-4 times, ONCE_SHARE to blocks touched
            // once (in runs of 1-128 blocks: sequential scans, which pollute an LRU cache), so that about half the
            // blocks are touched once.
            let warm = (cold_accesses as f64 * (1.0 - ONCE_SHARE)).round() as u64;
            let mut warm_left = warm;
            while warm_left > 0 {
                let b = rng.gen_range(0..cfg.volume_blocks);
                let k = rng.gen_range(2..=4u64).min(warm_left);
                for _ in 0..k {
                    emit(rng, b, 1, true);
                }
                warm_left -= k;
            }
            let mut once_left = cold_accesses - warm;
            while once_left > 0 {
                let run = [1u64, 1, 2, 4, 8, 16, 32, 64, 128][rng.gen_range(0..9)].min(once_left);
                let b = rng.gen_range(0..cfg.volume_blocks);
                emit(rng, b, run, true);
                once_left -= run;
            }
        }
        today.sort_by_key(|r| (r.time_ns, r.volume, r.offset));
    }
}

impl Iterator for EnsembleStream {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        while self.pos == self.today.len() {
            if self.day >= u64::from(self.cfg.days) {
                return None;
            }
            self.draw_day();
            self.day += 1;
            self.pos = 0;
        }
        let r = self.today[self.pos];
        self.pos += 1;
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn small() -> EnsembleConfig {
        EnsembleConfig { days: 3, accesses_per_day: 200_000, ..EnsembleConfig::with_volumes(12) }
    }

    /// The small trace, generated once for all tests.
    fn small_trace() -> &'static Trace {
        static T: std::sync::OnceLock<Trace> = std::sync::OnceLock::new();
        T.get_or_init(|| generate(&small()).unwrap())
    }

    /// The small trace, pinned by its digest as the generator that held the whole trace and
    /// sorted it at the end made it: the day-by-day stream must write the same trace.
    #[test]
    fn the_small_trace_is_pinned() {
        let t = small_trace();
        assert_eq!(
            crate::gen::test_util::digest(t.requests.iter()),
            (12_597_341_905_077_991_776, 538_179)
        );
    }

    /// Per-day block access counts.
    fn day_counts(t: &Trace, start: u64) -> Vec<HashMap<u64, u64>> {
        let mut days: Vec<HashMap<u64, u64>> = Vec::new();
        for r in &t.requests {
            let d = ((r.time_ns - start) / DAY_NS) as usize;
            if days.len() <= d {
                days.resize_with(d + 1, HashMap::new);
            }
            for k in r.block_keys(4096) {
                *days[d].entry(k).or_insert(0) += 1;
            }
        }
        days
    }

    /// Share of accesses drawn by the top `frac` of blocks.
    fn top_share(c: &HashMap<u64, u64>, frac: f64) -> f64 {
        let mut v: Vec<u64> = c.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        let n = ((v.len() as f64) * frac).ceil() as usize;
        v[..n].iter().sum::<u64>() as f64 / v.iter().sum::<u64>() as f64
    }

    #[test]
    fn is_sorted_named_and_sized() {
        let cfg = small();
        let t = small_trace();
        assert!(t.requests.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        assert_eq!(t.volumes.name(0), "prxy_0");
        assert_eq!(t.volumes.name(1), "src1_2");
        let blocks: u64 = t.requests.iter().map(|r| r.blocks(4096).count() as u64).sum();
        let want = cfg.accesses_per_day * cfg.days as u64;
        assert!((blocks as f64 - want as f64).abs() < want as f64 * 0.01, "{blocks} vs {want}");
        let first = t.requests[0].time_ns;
        let last = t.requests[t.requests.len() - 1].time_ns;
        assert!(first >= MSR_START_NS && last < MSR_START_NS + 3 * DAY_NS);
        // Same seed, same trace; another seed, another trace.
        assert_eq!(generate(&cfg).unwrap().requests, t.requests);
        let other = generate(&EnsembleConfig { seed: 2, ..cfg }).unwrap();
        assert_ne!(other.requests, t.requests);
    }

    /// SieveStore section 2, O1: each day the top 1 % of blocks draw a large share of the
    /// accesses (the paper measured 14-53 % per day; the generated days average above 40 %),
    /// about half of the blocks are touched once, and the great majority (paper: 99 %) see
    /// 10 or fewer accesses.
    #[test]
    fn has_the_papers_popularity_skew() {
        let t = small_trace();
        let days = day_counts(t, MSR_START_NS);
        let mut mean = 0.0;
        for (d, c) in days.iter().enumerate() {
            let share = top_share(c, 0.01);
            mean += share / days.len() as f64;
            assert!(share > 0.25 && share < 0.8, "day {d}: top 1 % share {share:.3}");
            let once = c.values().filter(|&&n| n == 1).count() as f64 / c.len() as f64;
            assert!((0.4..0.6).contains(&once), "day {d}: once-touched fraction {once:.3}");
            let le10 = c.values().filter(|&&n| n <= 10).count() as f64 / c.len() as f64;
            assert!(le10 > 0.93, "day {d}: blocks with <= 10 accesses {le10:.3}");
        }
        assert!(mean > 0.4, "mean top 1 % share {mean:.3}");
    }

    /// SieveStore Figure 3(a): skew differs between volumes; prxy is far more skewed than
    /// src1.
    #[test]
    fn skew_differs_between_volumes() {
        let t = small_trace();
        let mut per_vol: Vec<HashMap<u64, u64>> = vec![HashMap::new(); 2];
        for r in t.requests.iter().filter(|r| r.volume < 2 && r.time_ns < MSR_START_NS + DAY_NS) {
            for k in r.block_keys(4096) {
                *per_vol[r.volume as usize].entry(k).or_insert(0) += 1;
            }
        }
        let prxy = top_share(&per_vol[0], 0.01);
        let src1 = top_share(&per_vol[1], 0.01);
        assert!(prxy > 0.6, "prxy top-1 % share {prxy:.3}");
        assert!(src1 < 0.3, "src1 top-1 % share {src1:.3}");
    }

    /// The hot set drifts: consecutive days' top-1 % sets overlap substantially but not
    /// entirely.
    #[test]
    fn hot_set_drifts_day_to_day() {
        let t = small_trace();
        let days = day_counts(t, MSR_START_NS);
        let top = |c: &HashMap<u64, u64>| {
            let mut v: Vec<(u64, u64)> = c.iter().map(|(&k, &n)| (k, n)).collect();
            v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let n = (v.len() as f64 * 0.01).ceil() as usize;
            v[..n].iter().map(|x| x.0).collect::<std::collections::HashSet<u64>>()
        };
        let (a, b) = (top(&days[0]), top(&days[1]));
        let overlap = a.intersection(&b).count() as f64 / a.len() as f64;
        assert!(overlap > 0.3 && overlap < 0.9, "day 1/2 top-1 % overlap {overlap:.3}");
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(generate(&EnsembleConfig { days: 0, ..small() }).is_err());
        assert!(generate(&EnsembleConfig { volumes: vec![], ..small() }).is_err());
        assert!(generate(&EnsembleConfig { drift: 2.0, ..small() }).is_err());
    }
}
