//! One run: one replacement policy, one admission policy, one capacity, over a stream.
//!
//! Per block access: [`Replacement::lookup`]; then [`Admission::observe`] with the outcome;
//! on a miss, [`Admission::admit`] decides whether the block is inserted (an
//! allocation-write, which may evict). The accesses of the uncounted warm-up period
//! ([`RunConfig::warmup`]) run the same way; only the counters leave them out.

use super::cutter::Cutter;
use super::distinct::DistinctCounter;
use super::tally::Tally;
use super::warmup_period::{CountStart, WarmupPeriod};
use crate::{AccessStream, Counters, Interval, IntervalStats};
use ember_policy::{Access, Admission, Replacement, NEVER};
use ember_trace::formats::oracle_general::{record_key, RECORD_SIZE};
use ember_trace::Op;
use serde::{Deserialize, Serialize};

/// Accesses simulated between two progress reports.
const PROGRESS_CHUNK: usize = 1 << 20;

/// How to run one simulation (besides the policies and the stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunConfig {
    /// Cut the run into a timeline of intervals; `None` gives totals only.
    pub interval: Option<Interval>,
    /// The uncounted warm-up period: its requests run, but the counters start after it.
    pub warmup: WarmupPeriod,
}

/// The outcome of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// Replacement policy name (`lru`, ...).
    pub policy: String,
    /// Admission policy name (`aod`, ...).
    pub admission: String,
    /// Cache capacity in blocks.
    pub capacity_blocks: u64,
    /// Totals over the whole stream, after the uncounted warm-up period if there was one.
    pub totals: Counters,
    /// Per-interval counters when [`RunConfig::interval`] was set (intervals without any access
    /// are left out); the sum of those not flagged [`IntervalStats::warmup`] equals `totals`.
    pub timeline: Option<Vec<IntervalStats>>,
    /// Where counting started, after an uncounted warm-up period (`None` without one, or if
    /// the trace ended within it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_from: Option<CountStart>,
    /// With a sequential cutoff: the missed blocks it kept out of the cache (counted and
    /// uncounted periods alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_cutoff_bypasses: Option<u64>,
}

/// Simulate `policy` with `admission` over `stream`.
///
/// Generic so that a concrete policy type monomorphizes the hot loop; `dyn Replacement` and
/// `dyn Admission` work too.
pub fn simulate<R, A>(
    policy: &mut R,
    admission: &mut A,
    stream: &AccessStream,
    config: &RunConfig,
) -> SimResult
where
    R: Replacement + ?Sized,
    A: Admission + ?Sized,
{
    simulate_with_progress(policy, admission, stream, config, &mut |_| {})
}

/// [`simulate`], calling `progress(n)` after every `n` accesses simulated (about every
/// million accesses; never inside the per-access loop).
pub fn simulate_with_progress<R, A>(
    policy: &mut R,
    admission: &mut A,
    stream: &AccessStream,
    config: &RunConfig,
    progress: &mut dyn FnMut(u64),
) -> SimResult
where
    R: Replacement + ?Sized,
    A: Admission + ?Sized,
{
    let mut tally = Tally::new(config.interval.is_some());
    let mut cutter = Cutter::with_warmup(config.interval, config.warmup);
    for piece in cutter.cut_slices(stream.flags(), stream.times()) {
        tally.begin(&piece);
        let mut lo = piece.range.start;
        while lo < piece.range.end {
            let hi = (lo + PROGRESS_CHUNK).min(piece.range.end);
            tally.add(piece.counted, run_range(policy, admission, stream, lo, hi));
            progress((hi - lo) as u64);
            lo = hi;
        }
    }
    SimResult {
        policy: policy.name().to_owned(),
        admission: admission.name().to_owned(),
        capacity_blocks: policy.capacity() as u64,
        totals: tally.totals(),
        timeline: tally.timeline(),
        counted_from: tally.count_start(),
        seq_cutoff_bypasses: None,
    }
}

/// The hot loop over accesses `lo..hi` of `stream`.
#[inline(never)]
fn run_range<R, A>(
    policy: &mut R,
    admission: &mut A,
    stream: &AccessStream,
    lo: usize,
    hi: usize,
) -> Counters
where
    R: Replacement + ?Sized,
    A: Admission + ?Sized,
{
    let keys = &stream.keys()[lo..hi];
    let flags = &stream.flags()[lo..hi];
    // Empty when the stream keeps no times: accesses then carry time 0.
    let times = stream.times().get(lo..hi).unwrap_or(&[]);
    let next = stream.next_access().map(|n| &n[lo..hi]);
    run_slices(policy, admission, Slices { keys, flags, times, next, vtime: lo as u64 }, None)
}

/// A run of consecutive block accesses, as the hot loop reads them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slices<'a> {
    /// Block keys.
    pub keys: &'a [u64],
    /// Per-access flags (bit 0: write, bit 1: first block of a request).
    pub flags: &'a [u8],
    /// Per-access times, or empty (time 0).
    pub times: &'a [u64],
    /// Next-access vtimes, for oracle policies.
    pub next: Option<&'a [u64]>,
    /// The vtime of the first access.
    pub vtime: u64,
}

/// The hot loop: counters in locals, no allocation, static dispatch when `R` and `A` are
/// concrete. With a sieve that admits every miss (AOD) and no oracle, each access is one
/// combined [`Replacement::access`] (one index probe for a miss and its insertion).
#[inline]
///
/// With `wss`, the keys of the misses are counted into it (a batch at a time): a run that
/// started with an empty cache misses every block's first access, so that counts the
/// stream's distinct blocks exactly, at the cost of the misses only.
pub(crate) fn run_slices<R, A>(
    policy: &mut R,
    admission: &mut A,
    s: Slices<'_>,
    wss: Option<&mut DistinctCounter>,
) -> Counters
where
    R: Replacement + ?Sized,
    A: Admission + ?Sized,
{
    let Slices { keys, flags, times, next, vtime } = s;
    let (mut requests, mut writes, mut read_hits, mut write_hits) = (0u64, 0u64, 0u64, 0u64);
    let (mut write_misses, mut allocation_writes, mut evictions) = (0u64, 0u64, 0u64);
    let mut missed = MissBatch::new(wss);
    // How far ahead the policy is told which key comes (hides the index's memory latency):
    // its index group at twice this distance, its node at this distance (as in
    // `records_loop`). A power of two: the hints wait in a ring of twice as many.
    const PREFETCH_AHEAD: usize = 8;
    const RING: usize = 2 * PREFETCH_AHEAD;
    if admission.admits_every_miss() && next.is_none() {
        // The policy's hint for each of the next RING accesses (its index fingerprint: the
        // key is hashed once, for the prefetch, not again for the lookup).
        let mut hints = [0u32; RING];
        for (j, &k) in keys.iter().enumerate().take(RING) {
            hints[j] = policy.prefetch_hint(k);
        }
        for j in 0..keys.len() {
            let hint = hints[j % RING];
            if let Some(&k) = keys.get(j + RING) {
                hints[j % RING] = policy.prefetch_hint(k);
            }
            if j + PREFETCH_AHEAD < keys.len() {
                policy.prefetch_resident(hints[(j + PREFETCH_AHEAD) % RING]);
            }
            let f = flags[j];
            let is_write = f & 1 != 0;
            requests += ((f >> 1) & 1) as u64;
            writes += is_write as u64;
            let access = Access {
                key: keys[j],
                time_ns: times.get(j).copied().unwrap_or(0),
                op: crate::core::stream::op_of(f),
                vtime: vtime + j as u64,
                next_vtime: NEVER,
            };
            let (hit, evicted) = policy.access_hinted(&access, hint);
            missed.push(access.key, hit);
            write_hits += (hit & is_write) as u64;
            read_hits += (hit & !is_write) as u64;
            write_misses += (!hit & is_write) as u64;
            allocation_writes += !hit as u64;
            evictions += evicted.is_some() as u64;
        }
    } else {
        for j in 0..keys.len() {
            if let Some(&k) = keys.get(j + PREFETCH_AHEAD) {
                policy.prefetch(k);
            }
            let f = flags[j];
            let is_write = f & 1 != 0;
            requests += ((f >> 1) & 1) as u64;
            writes += is_write as u64;
            let access = Access {
                key: keys[j],
                time_ns: times.get(j).copied().unwrap_or(0),
                op: crate::core::stream::op_of(f),
                vtime: vtime + j as u64,
                next_vtime: match next {
                    Some(n) => n[j],
                    None => NEVER,
                },
            };
            let hit = policy.lookup(&access);
            missed.push(access.key, hit);
            admission.observe(&access, hit);
            if hit {
                if is_write {
                    write_hits += 1;
                } else {
                    read_hits += 1;
                }
            } else {
                write_misses += is_write as u64;
                // Occupancy-triggered decisions (the sequential cutoff's `full` policy, OCF's
                // nhit) see the cache as the real cache shows it to them.
                admission.set_occupancy(policy.len(), policy.capacity());
                if admission.admit(&access) {
                    allocation_writes += 1;
                    evictions += policy.insert(&access).is_some() as u64;
                }
            }
        }
    }
    missed.flush();
    let n = keys.len() as u64;
    let reads = n - writes;
    Counters {
        requests,
        block_accesses: n,
        reads,
        writes,
        read_hits,
        write_hits,
        read_misses: reads - read_hits,
        write_misses,
        allocation_writes,
        evictions,
    }
}

/// The keys of a run's misses on their way to a [`DistinctCounter`], a batch at a time (the
/// batch stays in the first-level cache; the counter's pages are touched once a batch).
struct MissBatch<'a> {
    wss: Option<&'a mut DistinctCounter>,
    keys: [u64; MissBatch::LEN],
    len: usize,
}

impl<'a> MissBatch<'a> {
    /// Keys held before they are handed over.
    const LEN: usize = 512;

    fn new(wss: Option<&'a mut DistinctCounter>) -> Self {
        Self { wss, keys: [0; Self::LEN], len: 0 }
    }

    /// Note an access to `key` that hit (`hit`) or missed.
    #[inline(always)]
    fn push(&mut self, key: u64, hit: bool) {
        if self.wss.is_none() {
            return;
        }
        // Branch-free: always written, kept only on a miss.
        if let Some(slot) = self.keys.get_mut(self.len) {
            *slot = key;
        }
        self.len += usize::from(!hit);
        if self.len == Self::LEN {
            self.flush();
        }
    }

    /// Hand the batch's keys to the counter.
    fn flush(&mut self) {
        if let Some(w) = self.wss.as_deref_mut() {
            w.add_all(&self.keys[..self.len]);
        }
        self.len = 0;
    }
}

/// The hot loop over oracleGeneral records read in place ([`ember_trace::BlockReader::next_records`]):
/// every access a read and a request of its own, for a sieve that admits every miss and no
/// oracle, so each is one [`Replacement::access`]. With `wss`, the keys of the misses are
/// counted into it (a batch at a time, from a buffer that stays in the first-level cache).
#[inline]
pub(crate) fn run_records<R>(
    policy: &mut R,
    records: &[u8],
    vtime: u64,
    wss: Option<&mut DistinctCounter>,
) -> Counters
where
    R: Replacement + ?Sized,
{
    /// Accesses between two hand-overs of missed keys to the counter.
    const BATCH: usize = 1024;
    let n = records.len() / RECORD_SIZE;
    let (mut hits, mut evictions) = (0u64, 0u64);
    match wss {
        Some(w) => {
            let mut missed = [0u64; BATCH];
            let mut lo = 0;
            while lo < n {
                let hi = (lo + BATCH).min(n);
                let (h, e, m) =
                    records_loop::<R, true>(policy, records, lo..hi, vtime, &mut missed);
                w.add_all(&missed[..m]);
                (hits, evictions) = (hits + h, evictions + e);
                lo = hi;
            }
        }
        None => {
            (hits, evictions, _) = records_loop::<R, false>(policy, records, 0..n, vtime, &mut []);
        }
    }
    let n = n as u64;
    Counters {
        requests: n,
        block_accesses: n,
        reads: n,
        writes: 0,
        read_hits: hits,
        write_hits: 0,
        read_misses: n - hits,
        write_misses: 0,
        allocation_writes: n - hits,
        evictions,
    }
}

/// [`run_records`]' loop over records `range`: (hits, evictions, number of misses, whose
/// keys are written to `out` if `KEEP_MISSES`; `out` holds the range's length).
#[inline(always)]
fn records_loop<R, const KEEP_MISSES: bool>(
    policy: &mut R,
    records: &[u8],
    range: std::ops::Range<usize>,
    vtime: u64,
    out: &mut [u64],
) -> (u64, u64, usize)
where
    R: Replacement + ?Sized,
{
    // How far ahead the policy is told which key comes (hides the index's memory latency):
    // its index group at twice this distance, its node (once the group is loaded) at this
    // distance ([`Replacement::prefetch_resident`]). A power of two: the hints wait in a
    // ring of twice as many.
    const PREFETCH_AHEAD: usize = 8;
    const RING: usize = 2 * PREFETCH_AHEAD;
    let (mut hits, mut evictions, mut m) = (0u64, 0u64, 0usize);
    let lo = range.start;
    // The policy's hint for each of the next RING accesses (its index fingerprint: the key is
    // hashed once, for the prefetch, not again for the lookup).
    let mut hints = [0u32; RING];
    for j in lo..range.end.min(lo + RING) {
        if let Some(k) = record_key(records, j) {
            hints[j % RING] = policy.prefetch_hint(k);
        }
    }
    let mine = records.get(lo * RECORD_SIZE..range.end * RECORD_SIZE).unwrap_or(&[]);
    // The record RING places ahead of each one (past the range's end, to the end of
    // `records`): walked beside it, not indexed, so the step costs no multiplication or
    // overflow check.
    let mut ahead =
        records.get((lo + RING) * RECORD_SIZE..).unwrap_or(&[]).chunks_exact(RECORD_SIZE);
    for (i, r) in mine.chunks_exact(RECORD_SIZE).enumerate() {
        let j = lo + i;
        let hint = hints[j % RING];
        if let Some(a) = ahead.next() {
            hints[j % RING] = policy.prefetch_hint(key_of_record(a));
        }
        if j + PREFETCH_AHEAD < range.end {
            policy.prefetch_resident(hints[(j + PREFETCH_AHEAD) % RING]);
        }
        let key = key_of_record(r);
        let access =
            Access { key, time_ns: 0, op: Op::Read, vtime: vtime + j as u64, next_vtime: NEVER };
        let (hit, evicted) = policy.access_hinted(&access, hint);
        hits += hit as u64;
        evictions += evicted.is_some() as u64;
        if KEEP_MISSES {
            // Branch-free: always written, kept only on a miss.
            if let Some(slot) = out.get_mut(m) {
                *slot = key;
            }
            m += usize::from(!hit);
        }
    }
    (hits, evictions, m)
}

/// The key (`obj_id`) of one whole oracleGeneral record, as
/// [`ember_trace::formats::oracle_general::record_key`] reads it.
#[inline(always)]
fn key_of_record(r: &[u8]) -> u64 {
    let mut id = [0u8; 8];
    id.copy_from_slice(&r[4..12]);
    u64::from_le_bytes(id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::testing::{trace_of, TinyLru};
    use ember_policy::admission::Aod;

    /// Refuses every miss.
    struct Never;
    impl Admission for Never {
        fn name(&self) -> &'static str {
            "never"
        }
        fn observe(&mut self, _: &Access, _: bool) {}
        fn admit(&mut self, _: &Access) -> bool {
            false
        }
    }

    #[test]
    fn lru_capacity_2_on_a_b_a_c_b() {
        // a(R) b(W) a(R) c(R) b(W) with LRU of 2 blocks:
        // a miss+insert; b miss+insert; a hit; c miss, evicts b; b miss, evicts a.
        let t = trace_of(&[(0, 'R'), (1, 'W'), (0, 'R'), (2, 'R'), (1, 'W')]);
        let s = AccessStream::from_trace(&t, 4096, false).unwrap();
        let r = simulate(&mut TinyLru::new(2), &mut Aod, &s, &RunConfig::default());
        let c = r.totals;
        assert_eq!((c.requests, c.block_accesses, c.reads, c.writes), (5, 5, 3, 2));
        assert_eq!((c.read_hits, c.write_hits, c.read_misses, c.write_misses), (1, 0, 2, 2));
        assert_eq!((c.allocation_writes, c.evictions), (4, 2));
        assert_eq!(c.misses(), 4);
        assert!((c.hit_ratio() - 0.2).abs() < 1e-12);
        assert_eq!(
            (r.policy.as_str(), r.admission.as_str(), r.capacity_blocks),
            ("tinylru", "aod", 2)
        );
        assert!(r.timeline.is_none());
    }

    #[test]
    fn write_hits_counted_apart_from_read_hits() {
        // a(W) a(W) a(R) b(R) a(W): 2 write hits, 1 read hit.
        let t = trace_of(&[(0, 'W'), (0, 'W'), (0, 'R'), (1, 'R'), (0, 'W')]);
        let s = AccessStream::from_trace(&t, 4096, false).unwrap();
        let c = simulate(&mut TinyLru::new(2), &mut Aod, &s, &RunConfig::default()).totals;
        assert_eq!((c.read_hits, c.write_hits, c.read_misses, c.write_misses), (1, 2, 1, 1));
        assert_eq!((c.allocation_writes, c.evictions), (2, 0));
    }

    #[test]
    fn refusing_admission_allocates_nothing_and_never_hits() {
        let t = trace_of(&[(0, 'R'), (1, 'W'), (0, 'R'), (2, 'R'), (1, 'W'), (0, 'R')]);
        let s = AccessStream::from_trace(&t, 4096, false).unwrap();
        let mut lru = TinyLru::new(2);
        let r = simulate(&mut lru, &mut Never, &s, &RunConfig::default());
        assert_eq!(r.totals.allocation_writes, 0);
        assert_eq!(r.totals.hits(), 0);
        assert_eq!(r.totals.evictions, 0);
        assert_eq!(r.totals.misses(), 6);
        assert_eq!(lru.len(), 0);
        assert_eq!(r.admission, "never");
    }

    #[test]
    fn timeline_sums_to_totals() {
        let pattern: Vec<(u64, char)> = (0..5000u64)
            .map(|i| ((i * 7919) % 97 + (i % 13), if i % 3 == 0 { 'W' } else { 'R' }))
            .collect();
        let t = trace_of(&pattern);
        let s = AccessStream::from_trace(&t, 4096, false).unwrap();
        let plain = simulate(&mut TinyLru::new(20), &mut Aod, &s, &RunConfig::default());
        for iv in [Interval::Requests(333), Interval::Time(777)] {
            let r = simulate(
                &mut TinyLru::new(20),
                &mut Aod,
                &s,
                &RunConfig { interval: Some(iv), ..RunConfig::default() },
            );
            let tl = r.timeline.as_ref().unwrap();
            assert!(tl.len() > 5, "{iv}: {} intervals", tl.len());
            let mut sum = Counters::default();
            for i in tl {
                sum += i.counters;
            }
            assert_eq!(sum, r.totals);
            assert_eq!(r.totals, plain.totals);
        }
        let r = simulate(
            &mut TinyLru::new(20),
            &mut Aod,
            &s,
            &RunConfig { interval: Some(Interval::Requests(1000)), ..RunConfig::default() },
        );
        let tl = r.timeline.unwrap();
        assert_eq!(tl.len(), 5);
        assert!(tl.iter().all(|i| i.counters.requests == 1000));
        assert_eq!(tl[3].start_request, 3000);
    }

    /// The uncounted warm-up period: the counters of a run with it equal those of the run
    /// without it less what the first timeline interval of the warm-up's length counted
    /// (the same requests), for warm-ups by requests and by time; and the cache state evolves
    /// during warm-up (the counted part of the run equals the whole run's tail, not a run
    /// over the tail alone). With a timeline, the intervals not flagged as warm-up add up to
    /// the totals, and the interval counting starts in is cut at the first counted request.
    #[test]
    fn warmup_counts_what_follows_it() {
        // A hot set of 8 blocks between accesses to 300 others.
        let pattern: Vec<(u64, char)> = (0..6000u64)
            .map(|i| {
                let b = if i % 2 == 0 { (i / 2) % 8 } else { 8 + (i * 7919) % 300 };
                (b, if i % 3 == 0 { 'W' } else { 'R' })
            })
            .collect();
        let t = trace_of(&pattern);
        let s = AccessStream::from_trace(&t, 4096, false).unwrap();
        let run = |cfg: RunConfig| simulate(&mut TinyLru::new(20), &mut Aod, &s, &cfg);
        let whole = run(RunConfig::default());
        assert_eq!(whole.counted_from, None);
        for (warmup, first) in [
            (WarmupPeriod::Requests(1234), Interval::Requests(1234)),
            (WarmupPeriod::Time(2_000), Interval::Time(2_000)),
        ] {
            let cut = run(RunConfig { interval: Some(first), ..RunConfig::default() });
            let head = cut.timeline.as_ref().unwrap()[0].counters;
            let warm = run(RunConfig { warmup, ..RunConfig::default() });
            assert_eq!(warm.totals, whole.totals - head, "{warmup}");
            assert!(warm.totals.hits() > 0 && head.hits() > 0, "{warmup}");
            let start = warm.counted_from.unwrap();
            assert_eq!((start.request, start.access), (head.requests, head.block_accesses));
            // A cold cache over the counted requests alone would miss more.
            let tail = trace_of(&pattern[head.requests as usize..]);
            let cold = simulate(
                &mut TinyLru::new(20),
                &mut Aod,
                &AccessStream::from_trace(&tail, 4096, false).unwrap(),
                &RunConfig::default(),
            );
            assert!(cold.totals.misses() > warm.totals.misses(), "{warmup}");
            // With a timeline.
            let tl = run(RunConfig { warmup, interval: Some(Interval::Requests(500)) });
            assert_eq!(tl.totals, warm.totals);
            let intervals = tl.timeline.unwrap();
            let mut counted = Counters::default();
            let mut all = Counters::default();
            for i in &intervals {
                all += i.counters;
                if !i.warmup {
                    counted += i.counters;
                }
            }
            assert_eq!(counted, warm.totals);
            assert_eq!(all, whole.totals);
            let k = intervals.iter().position(|i| !i.warmup).unwrap();
            assert!(intervals[..k].iter().all(|i| i.warmup) && k > 0);
            assert_eq!(intervals[k].start_request, start.request, "{warmup}");
        }
        // A warm-up longer than the trace counts nothing.
        let none =
            run(RunConfig { warmup: WarmupPeriod::Requests(1 << 40), ..RunConfig::default() });
        assert_eq!(none.totals, Counters::default());
        assert_eq!(none.counted_from, None);
    }

    #[test]
    fn oracle_stream_passes_next_access_to_the_policy() {
        /// Records the next_vtime it is given.
        struct Spy(Vec<u64>, TinyLru);
        impl Replacement for Spy {
            fn name(&self) -> &'static str {
                "spy"
            }
            fn capacity(&self) -> usize {
                self.1.capacity()
            }
            fn len(&self) -> usize {
                self.1.len()
            }
            fn contains(&self, key: u64) -> bool {
                self.1.contains(key)
            }
            fn lookup(&mut self, a: &Access) -> bool {
                self.0.push(a.next_vtime);
                self.1.lookup(a)
            }
            fn insert(&mut self, a: &Access) -> Option<u64> {
                self.1.insert(a)
            }
            fn remove(&mut self, key: u64) -> bool {
                self.1.remove(key)
            }
        }
        let t = trace_of(&[(0, 'R'), (1, 'R'), (0, 'R'), (2, 'R'), (1, 'R')]);
        let s = AccessStream::from_trace(&t, 4096, true).unwrap();
        let mut spy = Spy(Vec::new(), TinyLru::new(2));
        simulate(&mut spy, &mut Aod, &s, &RunConfig::default());
        assert_eq!(spy.0, vec![2, 4, NEVER, NEVER, NEVER]);
    }

    #[test]
    fn dyn_policies_run_too() {
        let t = trace_of(&[(0, 'R'), (1, 'W'), (0, 'R'), (2, 'R'), (1, 'W')]);
        let s = AccessStream::from_trace(&t, 4096, false).unwrap();
        let mut p: Box<dyn Replacement> = Box::new(TinyLru::new(2));
        let mut a: Box<dyn Admission> = Box::new(Aod);
        let r = simulate(p.as_mut(), a.as_mut(), &s, &RunConfig::default());
        assert_eq!(r.totals.read_hits, 1);
        assert_eq!(r.totals.evictions, 2);
    }
}
