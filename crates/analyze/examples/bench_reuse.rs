//! bench/analyze's measurement: exact reuse-distance analysis against an LRU simulation of
//! the same trace, in the same process.
//!
//! Usage: `bench_reuse [requests] [blocks] [alpha] [repeat]` (defaults 10,000,000 requests,
//! Zipf(0.9) over 1,000,000 blocks, best of 3). The LRU run is `ember_sim::simulate` with
//! `ember_policy::Lru` at 10 % of the WSS over a prebuilt `AccessStream`; the reuse run is
//! `ReuseHistogram::of` over the same block keys (distances, Figure 3 groups and the full
//! distribution). Prints both times and last `ratio: X` = reuse time / LRU time.
//!
//! Times are CPU time of this (single) thread, from `/proc/thread-self/schedstat`, for both
//! sides alike, so other processes on a shared machine do not inflate either; where that
//! file is missing (not Linux) both sides fall back to wall time.

use ember_analyze::{mrc, ReuseHistogram};
use ember_policy::admission::Aod;
use ember_policy::Lru;
use ember_sim::{simulate, AccessStream, RunConfig};
use ember_trace::gen::{Common, ZipfConfig};
use std::time::Instant;

/// A clock for both sides: this thread's CPU time in seconds, else wall time since `start`.
struct Clock {
    start: Instant,
    cpu: bool,
}

impl Clock {
    fn new() -> Self {
        Self { start: Instant::now(), cpu: thread_cpu_seconds().is_some() }
    }

    fn now(&self) -> f64 {
        match self.cpu {
            true => thread_cpu_seconds().unwrap_or(f64::NAN),
            false => self.start.elapsed().as_secs_f64(),
        }
    }
}

/// CPU time of the calling thread: the first field of `/proc/thread-self/schedstat`
/// (nanoseconds on CPU).
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let requests: u64 = arg(1, 10_000_000);
    let blocks: u64 = arg(2, 1_000_000);
    let alpha: f64 = arg(3, 0.9);
    let repeat: usize = arg(4, 3);
    let trace = ZipfConfig::new(alpha, blocks, requests, Common::with_seed(1)).trace()?;
    let stream = AccessStream::from_trace(&trace, 4096, false)?;
    drop(trace);
    let wss = stream.wss();
    let capacity = (wss / 10).max(1) as usize;
    let writes: Vec<bool> = (0..stream.len()).map(|i| stream.is_write(i)).collect();
    println!("trace: {requests} requests, Zipf({alpha}) over {blocks} blocks, WSS {wss} blocks");
    let clock = Clock::new();
    let what = if clock.cpu { "thread CPU time" } else { "wall time" };
    let (mut best_lru, mut best_reuse) = (f64::MAX, f64::MAX);
    let (mut lru_hits, mut reuse_hits) = (0, 0);
    for _ in 0..repeat {
        let t = clock.now();
        let r = simulate(&mut Lru::new(capacity), &mut Aod, &stream, &RunConfig::default());
        best_lru = best_lru.min(clock.now() - t);
        lru_hits = r.totals.hits();
        let t = clock.now();
        let h = ReuseHistogram::of(stream.keys(), &writes, 4096);
        best_reuse = best_reuse.min(clock.now() - t);
        reuse_hits = mrc::hits_from(&mrc::cumulative_hits(&h), capacity as u64);
    }
    if lru_hits != reuse_hits {
        return Err(format!("LRU hits {lru_hits} != reuse-distance hits {reuse_hits}").into());
    }
    println!(
        "LRU simulation at {capacity} blocks: {best_lru:.3} s {what} (best of {repeat}), hits {lru_hits}"
    );
    println!("reuse-distance analysis: {best_reuse:.3} s {what} (best of {repeat}), same hits");
    println!("ratio: {:.3}", best_reuse / best_lru);
    Ok(())
}
