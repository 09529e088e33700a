//! The shared grid against the reference policies, cell by cell.

use super::*;
use crate::core::warmup_period::WarmupPeriod;
use crate::{simulate, AccessStream, AccessStreamBuilder, RunConfig, Split};
use ember_policy::admission::Aod;
use ember_trace::{Op, Request};

/// xorshift64: a seeded stream of pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `n` requests over `blocks` blocks: a hot set, a skewed rest, some scans, writes one in
/// `write_every`, some requests over several blocks.
fn requests(rng: &mut Rng, n: usize, blocks: u64, write_every: u64) -> Vec<Request> {
    let mut scan = 0u64;
    (0..n as u64)
        .map(|t| {
            let r = rng.next();
            let block = match r % 10 {
                0..=4 => rng.below(blocks / 10 + 1),
                5..=7 => {
                    let a = rng.below(blocks);
                    let b = rng.below(blocks);
                    a.min(b)
                }
                8 => {
                    scan = (scan + 1) % blocks.max(1);
                    scan
                }
                _ => rng.below(blocks),
            };
            let len = if r >> 40 & 7 == 0 { 3 * 4096 } else { 4096 };
            let write = write_every > 0 && (r >> 20).is_multiple_of(write_every);
            Request {
                time_ns: t,
                volume: 0,
                op: if write { Op::Write } else { Op::Read },
                offset: block * 4096,
                length: len,
            }
        })
        .collect()
}

fn stream(reqs: &[Request]) -> AccessStream {
    let mut b = AccessStreamBuilder::new(4096, Split::Blocks).expect("builder");
    for r in reqs {
        b.push(r);
    }
    b.finish(false)
}

/// The reference: each cell simulated alone by its own policy.
fn reference(s: &AccessStream, cells: &[(Kind, usize)]) -> Vec<SimResult> {
    reference_after(s, cells, WarmupPeriod::None)
}

/// [`reference`] after an uncounted warm-up period.
fn reference_after(
    s: &AccessStream,
    cells: &[(Kind, usize)],
    warmup: WarmupPeriod,
) -> Vec<SimResult> {
    let cfg = RunConfig { warmup, ..RunConfig::default() };
    cells
        .iter()
        .map(|&(k, cap)| with_replacement!(k, cap, |p| simulate(&mut p, &mut Aod, s, &cfg)))
        .collect()
}

/// The shared grid over `s` in chunks of `chunk` accesses.
fn shared(
    s: &AccessStream,
    cells: &[(Kind, usize)],
    chunk: usize,
    threads: usize,
) -> Vec<SimResult> {
    shared_after(s, cells, chunk, threads, WarmupPeriod::None)
}

/// [`shared`] after an uncounted warm-up period.
fn shared_after(
    s: &AccessStream,
    cells: &[(Kind, usize)],
    chunk: usize,
    threads: usize,
    warmup: WarmupPeriod,
) -> Vec<SimResult> {
    let keys = s.keys();
    let mut at = 0usize;
    let mut next = |c: &mut BlockChunk| -> Result<bool, ()> {
        c.clear();
        while at < keys.len() && c.len() < chunk {
            c.keys.push(keys[at]);
            let w = u8::from(s.is_write(at));
            c.flags.push(if s.starts_request(at) { w | FLAG_FIRST } else { w });
            c.times.push(s.time(at));
            at += 1;
        }
        Ok(!c.is_empty())
    };
    let (got, totals) = run_shared_chunks(&mut next, cells, warmup, threads, &|_| {}).expect("run");
    assert_eq!(totals.accesses, s.len() as u64);
    assert_eq!(totals.requests, s.requests());
    assert_eq!(totals.wss, s.wss());
    assert_eq!(totals.counted_from, got.first().and_then(|r| r.counted_from));
    got
}

const KINDS: [Kind; 4] = [Kind::Lru, Kind::Fifo, Kind::Clock, Kind::S3Fifo];

/// Many random small traces and random size sets (zero, one, duplicates, sizes above the
/// working set, any order): every cell equals its single run.
#[test]
fn random_traces_equal_single_runs_cell_by_cell() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut hits_seen = 0u64;
    for round in 0..300 {
        let blocks = 1 + rng.below(400);
        let n = 1 + rng.below(3000) as usize;
        let reqs = requests(&mut rng, n, blocks, [0, 2, 5][round % 3]);
        let s = stream(&reqs);
        let mut cells = Vec::new();
        for k in KINDS {
            if rng.below(5) == 0 {
                continue;
            }
            for _ in 0..1 + rng.below(MAX_SIZES as u64) {
                let cap = match rng.below(6) {
                    0 => rng.below(3) as usize,
                    1 => blocks as usize + rng.below(10) as usize,
                    _ => 1 + rng.below(blocks) as usize,
                };
                cells.push((k, cap));
            }
        }
        // Every third round after an uncounted warm-up period, by requests or by time.
        let warmup = match round % 6 {
            2 => WarmupPeriod::Requests(rng.below(n as u64 + 10)),
            5 => WarmupPeriod::Time(rng.below(n as u64 + 10)),
            _ => WarmupPeriod::None,
        };
        let want = reference_after(&s, &cells, warmup);
        let got = shared_after(&s, &cells, 1 + rng.below(700) as usize, 1 + round % 3, warmup);
        assert_eq!(got, want, "round {round}: {blocks} blocks, {n} requests, cells {cells:?}");
        hits_seen += got.iter().map(|r| r.totals.hits()).sum::<u64>();
    }
    assert!(hits_seen > 100_000, "{hits_seen}");
}

/// Keys over 32 bits arriving mid-trace (and `u32::MAX` itself, the first key no exact tag
/// fits) re-tag the index by fingerprints: every cell still equals its single run.
#[test]
fn wide_keys_mid_trace_equal_single_runs() {
    let mut rng = Rng(7);
    for round in 0..20 {
        let blocks = 50 + rng.below(300);
        let n = 2000;
        let mut reqs = requests(&mut rng, n, blocks, [0, 3][round % 2]);
        for (i, r) in reqs.iter_mut().enumerate() {
            let block = r.offset / 4096;
            if i > n / 2 && block % 3 == 0 {
                r.offset += 1 << 45;
            }
            if block == 1 {
                r.offset = (u64::from(u32::MAX) - u64::from(i % 2 == 0)) * 4096;
            }
        }
        let s = stream(&reqs);
        let cells: Vec<(Kind, usize)> =
            KINDS.iter().flat_map(|&k| [7, 40, blocks as usize / 2].map(move |c| (k, c))).collect();
        let want = reference(&s, &cells);
        assert_eq!(shared(&s, &cells, 333, 1), want, "round {round}");
    }
    let mut g = SharedGrid::new(&[(Kind::Lru, 4)]).expect("supported");
    g.access(5, false);
    assert!(!g.entries.is_wide());
    g.access(u64::from(u32::MAX), false);
    assert!(g.entries.is_wide());
    g.access(5, false);
    assert_eq!(g.results()[0].totals.hits(), 1);
}

/// The bench's grid shape (four policies at 0.5, 1, 5 and 10 % of the blocks) on a longer
/// skewed trace, read as oracleGeneral records in place and as chunks.
#[test]
fn the_sixteen_cell_grid_equals_single_runs_on_records_and_chunks() {
    use ember_trace::{write_trace, Format, ReadOptions, Trace, VolumeTable};
    let mut rng = Rng(42);
    let blocks = 20_000u64;
    let reqs: Vec<Request> = requests(&mut rng, 200_000, blocks, 0)
        .into_iter()
        .map(|r| Request { length: 4096, ..r })
        .collect();
    let s = stream(&reqs);
    let cells: Vec<(Kind, usize)> = KINDS
        .iter()
        .flat_map(|&k| [5u64, 10, 50, 100].map(move |p| (k, (blocks * p / 1000) as usize)))
        .collect();
    assert_eq!(cells.len(), 16);
    let want = reference(&s, &cells);
    assert_eq!(shared(&s, &cells, 4099, 1), want);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.oracleGeneral.bin");
    write_trace(&path, Format::OracleGeneral, &Trace::new(reqs, VolumeTable::new()), 4096)
        .expect("write");
    for threads in [1, 2, 4] {
        let mut r = BlockReader::open(&path, &ReadOptions::default(), false, false).expect("open");
        assert!(r.reads_records_in_place());
        let (got, totals) =
            run_shared_records(&mut r, &cells, WarmupPeriod::None, threads, &|_| {}).expect("run");
        assert_eq!(got, want, "{threads} threads");
        assert_eq!(totals.wss, s.wss());
    }
    // After an uncounted warm-up period, on records and on chunks.
    {
        let warmup = WarmupPeriod::Requests(70_001);
        let want = reference_after(&s, &cells, warmup);
        assert_eq!(shared_after(&s, &cells, 4099, 2, warmup), want, "{warmup}");
        let mut r = BlockReader::open(&path, &ReadOptions::default(), false, false).expect("open");
        let (got, _) = run_shared_records(&mut r, &cells, warmup, 2, &|_| {}).expect("run");
        // oracleGeneral records keep whole seconds: counting starts at the second of its
        // first counted request.
        let whole_seconds = |mut r: SimResult| {
            if let Some(c) = r.counted_from.as_mut() {
                c.start_ns = c.start_ns / 1_000_000_000 * 1_000_000_000;
            }
            r
        };
        assert_eq!(got, want.into_iter().map(whole_seconds).collect::<Vec<_>>(), "{warmup}");
    }
    // The cells differ (so equality means something): misses fall with size per policy.
    for k in 0..4 {
        let m: Vec<u64> = want[k * 4..k * 4 + 4].iter().map(|r| r.totals.misses()).collect();
        assert!(m.windows(2).all(|w| w[0] > w[1]), "{:?}: {m:?}", cells[k * 4].0);
    }
}

/// The index frees keys no cell holds: after a long scan over many more blocks than any
/// cell, the slab never outgrows twice what the cells and S3-FIFO's ghosts hold (entries no
/// cell holds any more wait for the next sweep), and a sweep frees every entry no cell holds.
#[test]
fn entries_are_freed_when_no_cell_holds_them() {
    let cells = [(Kind::Lru, 100), (Kind::Fifo, 50), (Kind::Clock, 70), (Kind::S3Fifo, 100)];
    let mut g = SharedGrid::new(&cells).expect("supported");
    // Bound: 100 + 50 + 70 + 100 resident, 90 live ghosts, at most 2 * 90 + 64 ghost items.
    let held = 100 + 50 + 70 + 100 + 90 + 2 * 90 + 64;
    for k in 0..100_000u64 {
        g.access(k % 50_000, false);
        assert!(
            g.entries.slab_len() <= entries::SWEEP_MIN.max(2 * held),
            "{k}: {}",
            g.entries.slab_len()
        );
    }
    assert!(g.entries.len() <= g.entries.slab_len());
    g.entries.sweep();
    assert!(g.entries.len() <= held, "{}", g.entries.len());
    assert!(g.entries.len() >= 100, "{}", g.entries.len());
    assert_eq!(g.results()[0].totals.misses(), 100_000);
    // FIFO alone: every entry is freed by sweeps only.
    let mut g = SharedGrid::new(&[(Kind::Fifo, 10), (Kind::Fifo, 30)]).expect("supported");
    for k in 0..100_000u64 {
        g.access(k % 50_000, false);
    }
    assert!(g.entries.slab_len() <= entries::SWEEP_MIN.max(2 * 30 + 2), "{}", g.entries.slab_len());
    g.entries.sweep();
    assert_eq!(g.entries.len(), 30);
    assert_eq!(g.results()[1].totals.evictions, 100_000 - 30);
}

#[test]
fn unsupported_grids_are_refused() {
    assert!(SharedGrid::new(&[(Kind::Arc, 10), (Kind::Lru, 10)]).is_none());
    let nine: Vec<(Kind, usize)> = (1..=9).map(|c| (Kind::Fifo, c)).collect();
    assert!(SharedGrid::new(&nine).is_none());
    assert!(!SharedGrid::supports(&[(Kind::Lru, 1 << 31)]));
    assert!(SharedGrid::supports(&[(Kind::Lru, 10), (Kind::S3Fifo, 0)]));
}
