//! Simulation of a grid of runs over a trace that streams past in chunks, reading it once:
//! resident memory is the runs' policy state plus two chunks, whatever the trace's length.
//!
//! The caller supplies the chunks (an [`ember_trace::BlockReader`], usually) and one
//! [`ChunkRun`] per cell of the grid ([`policy_run`](super::chunk_run::policy_run));
//! [`run_streaming`] hands every chunk to
//! every run, on up to `threads` threads, while the next chunk is read. Timeline intervals
//! are cut exactly as [`crate::AccessStream::spans`] cuts them, across chunk boundaries, so a
//! streamed run's result equals [`crate::simulate`]'s on the whole stream.
//!
//! Oracle policies (Belady's OPT) need each access's next-access time, which is the future:
//! [`run_streaming_with_next`] takes it chunk by chunk beside the accesses, as
//! [`ember_trace::NextAccessReader`] reads it from the temporary files of a streaming pass
//! ([`ember_trace::Spool`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::chunk_run::ChunkRun;
use super::cutter::Cutter;
use super::distinct::DistinctCounter;
use super::warmup_period::{CountStart, WarmupPeriod};
use crate::{Interval, SimResult};
use ember_trace::formats::oracle_general::{record_key, RECORD_SIZE};
use ember_trace::{BlockChunk, BlockReader, TraceError};

/// Block accesses per chunk.
pub const CHUNK_ACCESSES: usize = 1 << 18;

/// What a streamed pass saw of the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamTotals {
    /// Requests touching at least one block.
    pub requests: u64,
    /// Block accesses.
    pub accesses: u64,
    /// Distinct blocks (the working-set size).
    pub wss: u64,
    /// Where counting started after the uncounted warm-up period, if there was one and it
    /// ended.
    pub counted_from: Option<CountStart>,
}

/// Read the trace chunk by chunk with `next_chunk` (which clears and fills the chunk it is
/// given, returning false at the end) and run every one of `runs` over it, on up to
/// `threads` threads while the next chunk is read; the requests of the uncounted `warmup`
/// period run but are not counted (the chunks must carry times for a warm-up by time).
/// `progress(n)` is called with the accesses read so far after each chunk. Returns each
/// run's result, in order, and the trace's totals; the first error of `next_chunk` ends the
/// pass.
pub fn run_streaming<E: Send>(
    next_chunk: &mut (dyn FnMut(&mut BlockChunk) -> Result<bool, E> + Send),
    runs: Vec<Box<dyn ChunkRun>>,
    interval: Option<Interval>,
    warmup: WarmupPeriod,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Vec<SimResult>, StreamTotals), E> {
    run_streaming_with_next(
        &mut |c: &mut BlockChunk, _: &mut Vec<u64>| next_chunk(c),
        runs,
        interval,
        warmup,
        threads,
        progress,
    )
}

/// Fills a chunk and its next-access vtimes, returning false at the end (see
/// [`run_streaming_with_next`]).
pub type NextChunkWithFuture<'a, E> =
    dyn FnMut(&mut BlockChunk, &mut Vec<u64>) -> Result<bool, E> + Send + 'a;

/// [`run_streaming`] for grids with oracle policies: `next_chunk` also fills the chunk's
/// next-access vtimes (positions in the whole stream, [`ember_policy::NEVER`] for a last
/// access), which the runs pass to their policies; left empty, accesses carry no future.
pub fn run_streaming_with_next<E: Send>(
    next_chunk: &mut NextChunkWithFuture<'_, E>,
    runs: Vec<Box<dyn ChunkRun>>,
    interval: Option<Interval>,
    warmup: WarmupPeriod,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Vec<SimResult>, StreamTotals), E> {
    let runs: Vec<Mutex<Box<dyn ChunkRun>>> = runs.into_iter().map(Mutex::new).collect();
    let mut cutter = Cutter::with_warmup(interval, warmup);
    let mut wss = DistinctCounter::new();
    let mut cur = BlockChunk::default();
    let mut spare = BlockChunk::default();
    let (mut cur_next, mut spare_next) = (Vec::new(), Vec::new());
    let mut more = next_chunk(&mut cur, &mut cur_next)?;
    let workers = threads.max(1).min(runs.len());
    while more {
        let pieces = cutter.cut(&cur);
        if runs.is_empty() {
            wss.add_all(&cur.keys);
            more = next_chunk(&mut spare, &mut spare_next)?;
        } else if threads <= 1 {
            // Every run starts empty (see `policy_run`): the first counts the working set
            // from its misses.
            for (i, r) in runs.iter().enumerate() {
                if let Ok(mut r) = r.lock() {
                    r.run(&cur, &cur_next, &pieces, (i == 0).then_some(&mut wss));
                }
            }
            more = next_chunk(&mut spare, &mut spare_next)?;
        } else {
            let next = AtomicUsize::new(0);
            let (chunk, next_times, pieces, runs) = (&cur, &cur_next, &pieces, &runs);
            let shared = Mutex::new(&mut wss);
            let read = std::thread::scope(|s| {
                for _ in 0..workers {
                    let (next, shared) = (&next, &shared);
                    s.spawn(move || loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(r) = runs.get(i) else { break };
                        // A poisoned lock means a run panicked; the scope re-raises it.
                        if let Ok(mut r) = r.lock() {
                            if i == 0 {
                                if let Ok(mut w) = shared.lock() {
                                    r.run(chunk, next_times, pieces, Some(&mut **w));
                                }
                            } else {
                                r.run(chunk, next_times, pieces, None);
                            }
                        }
                    });
                }
                next_chunk(&mut spare, &mut spare_next)
            });
            more = read?;
        }
        progress(cutter.accesses());
        std::mem::swap(&mut cur, &mut spare);
        std::mem::swap(&mut cur_next, &mut spare_next);
    }
    let results = runs.iter().filter_map(|r| r.lock().ok().map(|r| r.result())).collect();
    let totals = StreamTotals {
        requests: cutter.requests(),
        accesses: cutter.accesses(),
        wss: wss.count(),
        counted_from: cutter.count_start(),
    };
    Ok((results, totals))
}

/// [`run_streaming`] without an interval over a trace read as oracleGeneral records in place
/// ([`BlockReader::reads_records_in_place`]): zero-copy, no chunk is filled; each run reads
/// the keys from the records (on up to `threads` threads), and the working set is counted
/// from the first run's misses. Every run must start with an empty cache (as
/// [`policy_run`](super::chunk_run::policy_run) makes them). The records of the uncounted
/// `warmup` period run but are not counted. Returns what [`run_streaming`] returns on the
/// same trace.
pub fn run_streaming_records(
    reader: &mut BlockReader,
    runs: Vec<Box<dyn ChunkRun>>,
    warmup: WarmupPeriod,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Vec<SimResult>, StreamTotals), TraceError> {
    let mut warm = RecordWarmup::new(warmup);
    let mut runs = runs;
    let mut wss = DistinctCounter::new();
    let mut vtime = 0u64;
    let workers = threads.max(1).min(runs.len());
    let mut keys = Vec::new();
    loop {
        let records = reader.next_records(CHUNK_ACCESSES)?;
        let n = records.len() / RECORD_SIZE;
        if n == 0 {
            break;
        }
        let parts = warm.parts(records, vtime);
        if runs.is_empty() {
            keys.clear();
            keys.extend((0..n).filter_map(|j| record_key(records, j)));
            wss.add_all(&keys);
        } else if workers <= 1 {
            for (i, r) in runs.iter_mut().enumerate() {
                let mut w = (i == 0).then_some(&mut wss);
                for p in &parts {
                    r.run_records(p.records, p.vtime, p.counted, p.start, w.as_deref_mut());
                }
            }
        } else {
            let next = AtomicUsize::new(0);
            let cells: Vec<Mutex<&mut Box<dyn ChunkRun>>> =
                runs.iter_mut().map(Mutex::new).collect();
            let shared = Mutex::new(&mut wss);
            std::thread::scope(|s| {
                for _ in 0..workers {
                    let (next, cells, shared, parts) = (&next, &cells, &shared, &parts);
                    s.spawn(move || loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(r) = cells.get(i) else { break };
                        // A poisoned lock means a run panicked; the scope re-raises it.
                        if let Ok(mut r) = r.lock() {
                            for p in parts {
                                if i == 0 {
                                    if let Ok(mut w) = shared.lock() {
                                        let w = Some(&mut **w);
                                        r.run_records(p.records, p.vtime, p.counted, p.start, w);
                                    }
                                } else {
                                    r.run_records(p.records, p.vtime, p.counted, p.start, None);
                                }
                            }
                        }
                    });
                }
            });
        }
        vtime += n as u64;
        progress(vtime);
    }
    let results = runs.iter().map(|r| r.result()).collect();
    let counted_from = warm.count_start();
    let totals = StreamTotals { requests: vtime, accesses: vtime, wss: wss.count(), counted_from };
    Ok((results, totals))
}

/// A stretch of records read in place, on one side of the warm-up's end.
pub(crate) struct RecordPart<'a> {
    /// The records.
    pub records: &'a [u8],
    /// The vtime of the first.
    pub vtime: u64,
    /// False in the warm-up period.
    pub counted: bool,
    /// Set on the stretch counting starts with.
    pub start: Option<CountStart>,
}

/// Where the uncounted warm-up period ends in oracleGeneral records read in place (each
/// record one request; its time is its `clock_time` in seconds), across reads.
#[derive(Clone, Debug)]
pub(crate) struct RecordWarmup {
    warmup: WarmupPeriod,
    counting: bool,
    first_ns: Option<u64>,
    start: Option<CountStart>,
}

impl RecordWarmup {
    /// Nothing read yet.
    pub(crate) fn new(warmup: WarmupPeriod) -> Self {
        Self { warmup, counting: warmup.is_none(), first_ns: None, start: None }
    }

    /// Where counting started, once it has.
    pub(crate) fn count_start(&self) -> Option<CountStart> {
        self.start
    }

    /// `records`, the first at `vtime`, cut where the warm-up ends.
    pub(crate) fn parts<'a>(&mut self, records: &'a [u8], vtime: u64) -> Vec<RecordPart<'a>> {
        let n = records.len() / RECORD_SIZE;
        let time = |j: usize| {
            let mut t = [0u8; 4];
            t.copy_from_slice(&records[j * RECORD_SIZE..j * RECORD_SIZE + 4]);
            u64::from(u32::from_le_bytes(t)) * 1_000_000_000
        };
        if n > 0 && self.first_ns.is_none() {
            self.first_ns = Some(time(0));
        }
        if self.counting {
            return vec![RecordPart { records, vtime, counted: true, start: None }];
        }
        let first = self.first_ns.unwrap_or(0);
        let k =
            (0..n).find(|&j| self.warmup.over_at(vtime + j as u64, time(j).saturating_sub(first)));
        let Some(k) = k else {
            return vec![RecordPart { records, vtime, counted: false, start: None }];
        };
        self.counting = true;
        let at = vtime + k as u64;
        let start = CountStart { request: at, access: at, start_ns: time(k).saturating_sub(first) };
        self.start = Some(start);
        let (head, tail) = records.split_at(k * RECORD_SIZE);
        let mut parts = Vec::with_capacity(2);
        if k > 0 {
            parts.push(RecordPart { records: head, vtime, counted: false, start: None });
        }
        parts.push(RecordPart { records: tail, vtime: at, counted: true, start: Some(start) });
        parts
    }
}

/// Count the requests, accesses and distinct blocks of a trace in one streamed pass, with
/// no simulation (what a percentage cache size needs before the simulating pass).
pub fn count_pass<E>(
    next_chunk: &mut dyn FnMut(&mut BlockChunk) -> Result<bool, E>,
) -> Result<StreamTotals, E> {
    let mut t = StreamTotals::default();
    let mut wss = DistinctCounter::new();
    let mut c = BlockChunk::default();
    while next_chunk(&mut c)? {
        t.requests += c.requests();
        t.accesses += c.len() as u64;
        wss.add_all(&c.keys);
    }
    t.wss = wss.count();
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::chunk_run::policy_run;
    use crate::core::testing::TinyLru;
    use crate::{simulate, AccessStreamBuilder, RunConfig, Split};
    use ember_policy::admission::{Aod, Wmna};
    use ember_policy::replacement::Kind;
    use ember_policy::with_replacement;
    use ember_trace::{Op, Request, FLAG_FIRST};

    /// A trace with multi-block requests, writes, and time gaps (for time intervals).
    fn requests(n: u64) -> Vec<Request> {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut t = 0u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t += (x % 7) * 300_000_000 + if x.is_multiple_of(101) { 20_000_000_000 } else { 0 };
                let hot = !x.is_multiple_of(4);
                let block = if hot { (x >> 9) % 300 } else { (x >> 9) % 20_000 };
                Request {
                    time_ns: t,
                    volume: ((x >> 40) % 2) as u32,
                    op: if x.is_multiple_of(5) { Op::Write } else { Op::Read },
                    offset: block * 4096 + (x >> 20) % 4096,
                    length: [0u32, 1, 4096, 8192, 30_000][((x >> 30) % 5) as usize],
                }
            })
            .collect()
    }

    /// Chunks of `size` accesses cut from the split of `reqs`.
    fn chunker(
        reqs: &[Request],
        size: usize,
    ) -> impl FnMut(&mut BlockChunk) -> Result<bool, String> + Send + '_ {
        let mut i = 0usize;
        move |c: &mut BlockChunk| {
            c.clear();
            while c.len() < size && i < reqs.len() {
                let r = &reqs[i];
                i += 1;
                for (j, k) in r.block_keys(4096).enumerate() {
                    c.keys.push(k);
                    let w = if r.op.is_write() { 1 } else { 0 };
                    c.flags.push(if j == 0 { w | FLAG_FIRST } else { w });
                    c.times.push(r.time_ns);
                }
            }
            Ok(!c.is_empty())
        }
    }

    fn whole(reqs: &[Request]) -> crate::AccessStream {
        let mut b = AccessStreamBuilder::new(4096, Split::Blocks).expect("builder");
        for r in reqs {
            b.push(r);
        }
        b.finish(false)
    }

    #[test]
    fn streamed_grid_equals_whole_stream_runs_for_every_policy_and_interval() {
        let reqs = requests(30_000);
        let stream = whole(&reqs);
        let kinds: Vec<Kind> = Kind::ALL.iter().copied().filter(|k| !k.needs_oracle()).collect();
        assert!(kinds.len() >= 8);
        let warmups =
            [WarmupPeriod::None, WarmupPeriod::Requests(7777), WarmupPeriod::Time(9e12 as u64)];
        for (interval, warmup) in
            [None, Some(Interval::Requests(1000)), Some(Interval::Time(60_000_000_000))]
                .into_iter()
                .flat_map(|i| warmups.map(move |w| (i, w)))
        {
            let cfg = RunConfig { interval, warmup };
            let want: Vec<SimResult> = kinds
                .iter()
                .flat_map(|&k| [50usize, 2000].map(move |cap| (k, cap)))
                .map(|(k, cap)| {
                    with_replacement!(k, cap, |p| simulate(&mut p, &mut Aod, &stream, &cfg))
                })
                .collect();
            if !warmup.is_none() {
                assert!(want[0].counted_from.is_some_and(|s| s.request > 1000), "{warmup}");
            }
            for (chunk, threads) in [(1usize, 1usize), (777, 2), (1 << 20, 3)] {
                let runs: Vec<Box<dyn ChunkRun>> = kinds
                    .iter()
                    .flat_map(|&k| [50usize, 2000].map(move |cap| (k, cap)))
                    .map(|(k, cap)| {
                        with_replacement!(k, cap, |p| policy_run(p, Aod, interval.is_some()))
                    })
                    .collect();
                let mut next = chunker(&reqs, chunk);
                let (got, totals) =
                    run_streaming(&mut next, runs, interval, warmup, threads, &|_| {})
                        .expect("run");
                assert_eq!(
                    got, want,
                    "{interval:?} {warmup} chunks of {chunk} on {threads} threads"
                );
                assert_eq!(totals.counted_from, want[0].counted_from);
                assert_eq!(totals.accesses, stream.len() as u64);
                assert_eq!(totals.requests, stream.requests());
                assert_eq!(totals.wss, stream.wss());
                if interval.is_some() {
                    assert!(got[0].timeline.as_ref().is_some_and(|t| t.len() > 3));
                }
            }
        }
    }

    /// OPT (and every other policy beside it) through the temporary-file pass of next-access
    /// times gives exactly the results of the whole-trace path (next-access times computed
    /// over the held [`crate::AccessStream`]), on several trace lengths, chunk sizes and
    /// timelines.
    #[test]
    fn opt_through_the_spooled_future_equals_the_whole_trace_path() {
        for (n, chunk, interval) in [
            (1usize, 1usize, None),
            (3_000, 100, Some(Interval::Requests(500))),
            (40_000, 4_099, None),
            (120_000, 1 << 18, Some(Interval::Time(60_000_000_000))),
        ] {
            let reqs = requests(n as u64);
            let mut b = AccessStreamBuilder::new(4096, Split::Blocks).expect("builder");
            for r in &reqs {
                b.push(r);
            }
            let stream = b.finish(true);
            // The longer traces after an uncounted warm-up period of a third of them.
            let warmup =
                if n > 10_000 { WarmupPeriod::Requests(n as u64 / 3) } else { WarmupPeriod::None };
            let cfg = RunConfig { interval, warmup };
            let cells: Vec<(Kind, usize)> = [Kind::Opt, Kind::Lru, Kind::S3Fifo]
                .iter()
                .flat_map(|&k| [1usize, 64, 1500].map(move |cap| (k, cap)))
                .collect();
            let want: Vec<SimResult> = cells
                .iter()
                .map(|&(k, cap)| {
                    with_replacement!(k, cap, |p| simulate(&mut p, &mut Aod, &stream, &cfg))
                })
                .collect();
            let mut spool = ember_trace::Spool::new(true).expect("spool");
            let mut read = chunker(&reqs, chunk);
            let mut c = BlockChunk::default();
            while read(&mut c).expect("chunk") {
                spool.push(&c).expect("push");
            }
            let future = spool.finish().expect("backward pass");
            assert_eq!(future.distinct(), stream.wss());
            let mut reader = future.reader();
            let runs: Vec<Box<dyn ChunkRun>> = cells
                .iter()
                .map(|&(k, cap)| {
                    with_replacement!(k, cap, |p| policy_run(p, Aod, interval.is_some()))
                })
                .collect();
            let (got, totals) = run_streaming_with_next(
                &mut |c, next| reader.next_chunk(c, next, chunk),
                runs,
                interval,
                warmup,
                2,
                &|_| {},
            )
            .expect("run");
            assert_eq!(got, want, "{n} requests in chunks of {chunk}, {interval:?}");
            assert_eq!(totals.accesses, stream.len() as u64);
            if n > 1000 {
                // OPT beats LRU at every size but the trivial one: the future was used.
                assert!(got[1].totals.misses() < got[4].totals.misses(), "{n}");
            }
        }
    }

    /// The zero-copy records path gives exactly what the chunk path gives on the same
    /// oracleGeneral file (mapped, and through a decompressor), for every policy at sizes 0,
    /// 1, 50 and 2000, with and without a timeline, on one and three threads; the working
    /// set counted from the first run's misses equals the chunk path's count of every key,
    /// whichever policy runs first.
    #[test]
    fn records_in_place_equal_the_chunk_path() {
        use ember_trace::{write_trace, Format, ReadOptions, Trace, VolumeTable};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut v = VolumeTable::new();
        v.intern("a");
        v.intern("b");
        let trace = Trace::new(requests(15_000), v);
        let kinds: Vec<Kind> = Kind::ALL.iter().copied().filter(|k| !k.needs_oracle()).collect();
        for name in ["t.oracleGeneral.bin", "t.oracleGeneral.bin.gz"] {
            let path = dir.path().join(name);
            write_trace(&path, Format::OracleGeneral, &trace, 4096).expect("write");
            let opts = ReadOptions::default();
            let warmups =
                [WarmupPeriod::None, WarmupPeriod::Requests(5000), WarmupPeriod::Time(3e12 as u64)];
            for (timeline, warmup) in
                [(false, warmups[0]), (true, warmups[0]), (false, warmups[1]), (true, warmups[2])]
            {
                for first in [0usize, kinds.len() - 1] {
                    let mut order = kinds.clone();
                    order.rotate_left(first);
                    let cells: Vec<(Kind, usize)> = order
                        .iter()
                        .flat_map(|&k| [0usize, 1, 50, 2000].map(move |cap| (k, cap)))
                        .collect();
                    let runs = || -> Vec<Box<dyn ChunkRun>> {
                        cells
                            .iter()
                            .map(|&(k, cap)| {
                                with_replacement!(k, cap, |p| policy_run(p, Aod, timeline))
                            })
                            .collect()
                    };
                    let mut r =
                        BlockReader::open(&path, &opts, false, !warmup.is_none()).expect("open");
                    let (want, want_t) = run_streaming(
                        &mut |c| r.next_chunk(c, 4099),
                        runs(),
                        None,
                        warmup,
                        1,
                        &|_| {},
                    )
                    .expect("chunks");
                    if !warmup.is_none() {
                        assert!(want_t.counted_from.is_some_and(|s| s.request > 2000), "{warmup}");
                    }
                    assert!(want_t.accesses > 20_000 && want_t.wss > 1000, "{want_t:?}");
                    for threads in [1usize, 3] {
                        let mut r = BlockReader::open(&path, &opts, false, false).expect("open");
                        assert!(r.reads_records_in_place());
                        let (got, got_t) =
                            run_streaming_records(&mut r, runs(), warmup, threads, &|_| {})
                                .expect("run");
                        assert_eq!(got, want, "{name} {timeline} {warmup} threads {threads}");
                        assert_eq!(got_t, want_t, "{name} first {:?}", order[0]);
                    }
                }
            }
            // No run at all: the working set is still counted.
            let mut r = BlockReader::open(&path, &opts, false, false).expect("open");
            let (none, t) =
                run_streaming_records(&mut r, Vec::new(), WarmupPeriod::None, 1, &|_| {})
                    .expect("run");
            assert!(none.is_empty());
            let mut r = BlockReader::open(&path, &opts, false, false).expect("open");
            assert_eq!(t, count_pass(&mut |c| r.next_chunk(c, 1000)).expect("count"));
        }
    }

    /// A sieve that refuses misses takes the general loop inside the records path, with the
    /// same result as the chunk path.
    #[test]
    fn records_with_a_refusing_sieve_equal_the_chunk_path() {
        use ember_trace::{write_trace, Format, ReadOptions, Trace, VolumeTable};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("w.oracleGeneral.bin");
        let mut v = VolumeTable::new();
        v.intern("a");
        let trace = Trace::new(requests(8_000), v);
        write_trace(&path, Format::OracleGeneral, &trace, 4096).expect("write");
        let opts = ReadOptions::default();
        let mut r = BlockReader::open(&path, &opts, false, false).expect("open");
        let runs = vec![policy_run(TinyLru::new(100), Wmna, false)];
        let want = run_streaming(
            &mut |c| r.next_chunk(c, 777),
            runs,
            None,
            WarmupPeriod::None,
            1,
            &|_| {},
        );
        let mut r = BlockReader::open(&path, &opts, false, false).expect("open");
        let runs = vec![policy_run(TinyLru::new(100), Wmna, false)];
        let got = run_streaming_records(&mut r, runs, WarmupPeriod::None, 1, &|_| {}).expect("run");
        assert_eq!(got, want.expect("chunks"));
        assert!(got.0[0].totals.hits() > 0 && got.1.wss > 100, "{got:?}");
    }

    #[test]
    fn a_sieve_that_refuses_streams_like_the_whole_stream() {
        let reqs = requests(20_000);
        let stream = whole(&reqs);
        let want = simulate(&mut TinyLru::new(100), &mut Wmna, &stream, &RunConfig::default());
        let mut next = chunker(&reqs, 999);
        let runs = vec![policy_run(TinyLru::new(100), Wmna, false)];
        let (got, _) =
            run_streaming(&mut next, runs, None, WarmupPeriod::None, 2, &|_| {}).expect("run");
        assert_eq!(got, vec![want]);
        assert!(got[0].totals.allocation_writes < got[0].totals.misses());
    }

    #[test]
    fn count_pass_and_errors() {
        let reqs = requests(5_000);
        let stream = whole(&reqs);
        let t = count_pass(&mut chunker(&reqs, 100)).expect("count");
        assert_eq!(
            (t.requests, t.accesses, t.wss),
            (stream.requests(), stream.len() as u64, stream.wss())
        );
        let mut calls = 0;
        let mut failing = |c: &mut BlockChunk| {
            calls += 1;
            c.clear();
            if calls > 2 {
                return Err("broken trace".to_string());
            }
            c.keys.push(calls);
            c.flags.push(FLAG_FIRST);
            Ok(true)
        };
        let runs = vec![policy_run(TinyLru::new(10), Aod, false)];
        let e = run_streaming(&mut failing, runs, None, WarmupPeriod::None, 1, &|_| {})
            .expect_err("fails");
        assert_eq!(e, "broken trace");
    }
}
