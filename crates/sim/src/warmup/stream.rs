//! The warmup experiment ([`crate::warmup::experiment`]) over a trace that streams past, in
//! memory bounded by the caches and selectors, not the trace.
//!
//! A counting pass ([`WarmupCensus`]) learns what the experiment needs before its first
//! access: the trace's first time (periods count from it), each volume's working-set size
//! (cache and warmup sizes are percentages of it) and whether each volume's accesses come in
//! time order. The experiment pass ([`run_warmup_stream`]) then runs every volume at once:
//! the always-warm cache, and for the current period the cold cache and one cache per
//! selector (preloaded at the period's start by a selector that observed the previous period
//! as it went by), while fresh selectors observe the current period for the next one.
//!
//! The whole-trace experiment sorts each volume's accesses by time (a stable sort); the
//! stream cannot, so it gives the same result only when every volume's accesses are already
//! in time order ([`WarmupCensus::time_ordered`]); callers hold the trace otherwise.

use crate::core::distinct::DistinctCounter;
use crate::warmup::experiment::{Cache, DayRuns, SchemeRun, WarmupConfig};
use crate::warmup::load::ReadPoint;
use crate::warmup::scheme::Scheme;
use ember_policy::warmup::WarmupSelector;
use ember_trace::{Op, Request, VolumeTable};

/// What the warmup experiment needs to know of a trace before it runs.
#[derive(Clone, Debug, Default)]
pub struct WarmupCensus {
    /// Smallest request time (periods count from it); 0 for an empty trace.
    pub t0: u64,
    /// Per volume id: its name, block accesses and distinct blocks.
    pub volumes: Vec<VolumeCensus>,
    /// True when every volume's block accesses are in non-decreasing time order.
    pub time_ordered: bool,
}

/// One volume of a [`WarmupCensus`].
#[derive(Clone, Debug, Default)]
pub struct VolumeCensus {
    /// Volume name.
    pub name: String,
    /// Block accesses.
    pub accesses: u64,
    /// Distinct blocks.
    pub wss_blocks: u64,
}

/// A [`WarmupCensus`] being taken, request by request.
#[derive(Debug)]
pub struct CensusTaker {
    block_size: u64,
    t0: Option<u64>,
    /// Per volume: accesses, distinct blocks, time of the last access.
    volumes: Vec<(u64, DistinctCounter, u64)>,
    time_ordered: bool,
    keys: Vec<u64>,
}

impl CensusTaker {
    /// A census of `block_size`-byte blocks (at least 1).
    pub fn new(block_size: u64) -> Self {
        Self {
            block_size: block_size.max(1),
            t0: None,
            volumes: Vec::new(),
            time_ordered: true,
            keys: Vec::new(),
        }
    }

    /// Count one request.
    pub fn push(&mut self, r: &Request) {
        self.t0 = Some(self.t0.map_or(r.time_ns, |t| t.min(r.time_ns)));
        self.keys.clear();
        self.keys.extend(r.block_keys(self.block_size));
        if self.keys.is_empty() {
            return;
        }
        let v = r.volume as usize;
        if v >= self.volumes.len() {
            self.volumes.resize_with(v + 1, || (0, DistinctCounter::new(), 0));
        }
        let vol = &mut self.volumes[v];
        if vol.0 > 0 && r.time_ns < vol.2 {
            self.time_ordered = false;
        }
        vol.0 += self.keys.len() as u64;
        vol.1.add_all(&self.keys);
        vol.2 = r.time_ns;
    }

    /// The census, with the volume names of `table`.
    pub fn finish(self, table: &VolumeTable) -> WarmupCensus {
        let names = table.names();
        let n = names.len().max(1).max(self.volumes.len());
        let volumes = (0..n)
            .map(|v| {
                let (accesses, wss) = self.volumes.get(v).map_or((0, 0), |x| (x.0, x.1.count()));
                VolumeCensus {
                    name: names.get(v).cloned().unwrap_or_default(),
                    accesses,
                    wss_blocks: wss,
                }
            })
            .collect();
        WarmupCensus { t0: self.t0.unwrap_or(0), volumes, time_ordered: self.time_ordered }
    }
}

/// One volume's experiment in progress.
struct VolumeRun {
    name: String,
    capacity: u64,
    warmup: u64,
    warm: Cache,
    /// The current period and its start time.
    period: Option<(u64, u64)>,
    /// The always-warm cache's timeline of the current period.
    warm_timeline: Vec<ReadPoint>,
    /// The cold and warmed caches of the current period: scheme, cache, blocks preloaded,
    /// timeline (none in period 0).
    runs: Vec<(Scheme, Cache, u64, Vec<ReadPoint>)>,
    /// Selectors observing the current period, for the next one.
    observers: Vec<Box<dyn WarmupSelector>>,
    out: Vec<DayRuns>,
}

/// The experiment's state over every volume.
struct Experiment<'a> {
    cfg: &'a WarmupConfig,
    t0: u64,
    bs: u64,
    bpr: u64,
    ra: u64,
    n_int: usize,
    volumes: Vec<Option<VolumeRun>>,
}

impl Experiment<'_> {
    /// Selectors of `cfg` seeded for period `d`, with no history.
    fn selectors(&self, d: u64) -> Vec<Box<dyn WarmupSelector>> {
        self.cfg.selectors.iter().map(|k| k.build(self.cfg.seed ^ d)).collect()
    }

    /// Close `v`'s current period (recording its runs unless it is period 0) and open
    /// period `next` if any.
    fn turn(&self, v: &mut VolumeRun, next: Option<u64>) {
        if let Some((d, _)) = v.period {
            if d != 0 {
                let mut runs = vec![SchemeRun {
                    scheme: Scheme::AlwaysWarm.name().into(),
                    preloaded_blocks: 0,
                    timeline: std::mem::take(&mut v.warm_timeline),
                }];
                for (scheme, _, preloaded, tl) in v.runs.drain(..) {
                    runs.push(SchemeRun {
                        scheme: scheme.name().into(),
                        preloaded_blocks: preloaded,
                        timeline: tl,
                    });
                }
                v.out.push(DayRuns {
                    volume: v.name.clone(),
                    day: d,
                    capacity_blocks: v.capacity,
                    warmup_blocks: v.warmup,
                    block_size: self.bs,
                    interval_s: self.cfg.interval_ns as f64 / 1e9,
                    runs,
                });
            }
        }
        let Some(d) = next else { return };
        let start = self.t0 + d * self.cfg.period_ns;
        // The history is the previous period only when it is period d - 1.
        let history = match v.period {
            Some((p, _)) if p + 1 == d => std::mem::take(&mut v.observers),
            _ => self.selectors(d),
        };
        v.runs.clear();
        if d != 0 {
            v.runs.push((Scheme::Cold, Cache::new(v.capacity, self.ra), 0, Vec::new()));
            for (&k, s) in self.cfg.selectors.iter().zip(&history) {
                let mut cache = Cache::new(v.capacity, self.ra);
                let preloaded = cache.preload(s.as_ref(), v.warmup, self.bpr, start);
                v.runs.push((Scheme::Warmed(k), cache, preloaded, Vec::new()));
            }
            for r in &mut v.runs {
                r.3 = vec![ReadPoint::default(); self.n_int];
            }
        }
        drop(history);
        v.warm_timeline = vec![ReadPoint::default(); self.n_int];
        v.observers = self.selectors(d + 1);
        v.period = Some((d, start));
    }

    /// Run one block access of volume `vol`.
    fn access(&mut self, vol: usize, t: u64, k: u64, w: bool) {
        let Some(mut v) = self.volumes.get_mut(vol).and_then(Option::take) else { return };
        let d = (t - self.t0.min(t)) / self.cfg.period_ns;
        if v.period.map(|p| p.0) != Some(d) {
            self.turn(&mut v, Some(d));
        }
        let start = v.period.map_or(0, |p| p.1);
        let iv = self.cfg.interval_ns;
        v.warm.step(t, k, w, start, iv, &mut v.warm_timeline);
        for (_, cache, _, tl) in &mut v.runs {
            cache.step(t, k, w, start, iv, tl);
        }
        for s in &mut v.observers {
            s.observe(k / self.bpr, t);
        }
        self.volumes[vol] = Some(v);
    }
}

/// Run the warmup experiment of `cfg` over `requests` (one pass), given the trace's
/// `census`: the same periods as [`crate::warmup::experiment::run_warmup`] over the whole
/// trace, when [`WarmupCensus::time_ordered`] holds. Stops at the first error of `requests`.
pub fn run_warmup_stream<E>(
    census: &WarmupCensus,
    cfg: &WarmupConfig,
    requests: impl Iterator<Item = Result<Request, E>>,
) -> Result<Vec<DayRuns>, E> {
    let bs = cfg.block_size.max(1);
    let mut ex = Experiment {
        cfg,
        t0: census.t0,
        bs,
        bpr: (cfg.region_bytes / bs).max(1),
        ra: cfg.readahead_bytes / bs,
        n_int: cfg.period_ns.div_ceil(cfg.interval_ns.max(1)) as usize,
        volumes: Vec::new(),
    };
    ex.volumes = census
        .volumes
        .iter()
        .map(|c| {
            (c.accesses > 0).then(|| {
                let (capacity, warmup) = cfg.sizes(c.wss_blocks);
                VolumeRun {
                    name: c.name.clone(),
                    capacity,
                    warmup,
                    warm: Cache::new(capacity, ex.ra),
                    period: None,
                    warm_timeline: Vec::new(),
                    runs: Vec::new(),
                    observers: Vec::new(),
                    out: Vec::new(),
                }
            })
        })
        .collect();
    for r in requests {
        let r = r?;
        let w = r.op == Op::Write;
        for k in r.block_keys(bs) {
            ex.access(r.volume as usize, r.time_ns, k, w);
        }
    }
    let mut out = Vec::new();
    for slot in 0..ex.volumes.len() {
        if let Some(mut v) = ex.volumes[slot].take() {
            ex.turn(&mut v, None);
            out.append(&mut v.out);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warmup::experiment::{run_warmup, VolumeAccesses};
    use ember_policy::warmup::SelectorKind;
    use ember_trace::Trace;

    const H: u64 = 3_600_000_000_000;

    /// Two volumes over five periods (period 2 empty on volume 1), reads and writes,
    /// a skewed key mix: the streamed experiment equals the whole-trace one.
    #[test]
    fn streamed_experiment_equals_the_whole_trace_one() {
        let mut v = VolumeTable::new();
        v.intern("a");
        v.intern("b");
        let mut reqs = Vec::new();
        let mut x = 7u64;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = i * (5 * H / 20_000);
            let vol = (x >> 60) as u32 % 2;
            if vol == 1 && (2 * H..3 * H).contains(&t) {
                continue;
            }
            let block = (x >> 33) % (if x >> 63 == 1 { 64 } else { 2000 });
            let op = if (x >> 20).is_multiple_of(5) { Op::Write } else { Op::Read };
            reqs.push(Request { time_ns: t, volume: vol, op, offset: block * 4096, length: 8192 });
        }
        let trace = Trace::new(reqs, v);
        for (region, readahead) in [(4096, 0), (1 << 16, 32 << 10)] {
            let cfg = WarmupConfig {
                period_ns: H,
                interval_ns: H / 6,
                cache_percent: 30.0,
                warmup_percent: 10.0,
                region_bytes: region,
                readahead_bytes: readahead,
                selectors: SelectorKind::ALL.to_vec(),
                ..Default::default()
            };
            let vols = VolumeAccesses::of_trace(&trace, 4096);
            let whole = run_warmup(&vols, 0, &cfg);
            let mut census = CensusTaker::new(4096);
            trace.requests.iter().for_each(|r| census.push(r));
            let census = census.finish(&trace.volumes);
            assert!(census.time_ordered);
            assert_eq!(census.volumes[1].wss_blocks, vols[1].wss_blocks);
            let streamed =
                run_warmup_stream::<()>(&census, &cfg, trace.requests.iter().map(|r| Ok(*r)))
                    .unwrap();
            assert_eq!(whole.len(), 4 + 3, "periods 1-4 of a, 1, 3, 4 of b");
            assert!(whole[0].runs.iter().any(|r| r.timeline.iter().any(|p| p.read_hits > 0)));
            assert_eq!(streamed, whole);
        }
    }

    #[test]
    fn census_sees_a_volume_out_of_time_order() {
        let r = |t, vol| Request { time_ns: t, volume: vol, op: Op::Read, offset: 0, length: 1 };
        let mut c = CensusTaker::new(4096);
        // Interleaved volumes, each in order: ordered.
        for q in [r(5, 0), r(1, 1), r(6, 0), r(2, 1)] {
            c.push(&q);
        }
        let table = VolumeTable::new();
        assert!(c.finish(&table).time_ordered);
        let mut c = CensusTaker::new(4096);
        for q in [r(5, 0), r(4, 0)] {
            c.push(&q);
        }
        let census = c.finish(&table);
        assert!(!census.time_ordered);
        assert_eq!(
            (census.t0, census.volumes[0].accesses, census.volumes[0].wss_blocks),
            (4, 2, 1)
        );
    }
}
