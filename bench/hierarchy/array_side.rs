//! bench/hierarchy's measurement (built as the `hierarchy_array_side` example of ember-sim):
//! the cost of the adaptive array cache alone (Wong & Wilkes 2002, section 4.2: a read ghost
//! and a demoted ghost, insertion into one of N_segs = 10 exponentially sized segments) against
//! the policy crate's plain `Lru`, on the same array-side request stream.
//!
//! The stream: `CLIENTS` clients (`ember trace gen multi-client`'s generator: Zipf alpha 1,
//! half of each working set shared, W warm-up and 10 W timed READS per client) each behind an
//! LRU client cache of W/4 blocks; every client miss sends the array a DEMOTE of the block its
//! cache ejected (if any) and then a READ. The client side is run once, before any timing;
//! its client hit rate is the same for every demoting scheme (Table 2), so both array caches
//! see exactly the same stream.
//!
//! Timed: DEMOTE-ADAPT-EXP's `ArrayCache` and `ember_policy::Lru` (every READ and DEMOTE an
//! LRU access: a hit moves the block to the MRU end, a miss inserts it there — DEMOTE-LRU,
//! checked against `ArrayCache`'s DEMOTE-LRU hit count) replay the stream into an array of
//! W * CLIENTS / 4 blocks, alternately first, `RUNS` times each. Time is this thread's CPU
//! time (`/proc/thread-self/schedstat`, so other processes on the shared machine do not count;
//! wall-clock time where that file is missing, for both sides alike).
//! Prints each run, the median and spread per structure, and last `ratio: X` = the median
//! over runs of adaptive time / LRU time (both from the same run).
//!
//! Usage: hierarchy_array_side [CLIENTS [REQUESTS [RUNS]]] (defaults 8, 10,000,000, 5).

use ember_policy::demote::{ArrayCache, ArrayConfig, Scheme};
use ember_policy::{Access, Lru, Replacement};
use ember_trace::gen::multi_client::{MultiClientConfig, Pattern, Sharing};
use ember_trace::gen::Common;
use ember_trace::{block_key, key_block, Op};
use std::time::Instant;

/// This thread's CPU time in seconds (`/proc/thread-self/schedstat`'s first field), if known.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Seconds spent in `f`: CPU time of this thread, or wall-clock time where it is unknown.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let (wall, cpu) = (Instant::now(), thread_cpu_seconds());
    let out = f();
    let secs = match (cpu, thread_cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => wall.elapsed().as_secs_f64(),
    };
    (secs, out)
}

/// One request the array sees.
#[derive(Clone, Copy)]
enum ArrayOp {
    Read(u64),
    Demote(u64),
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).map_or(default, |s| {
        s.parse().unwrap_or_else(|_| panic!("argument {i} ({s:?}) is not a number"))
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Replay through the adaptive array; returns (seconds, READ hits).
fn adaptive(ops: &[ArrayOp], capacity: usize, scheme: Scheme) -> Result<(f64, u64), String> {
    let mut a = ArrayCache::new(ArrayConfig::new(capacity, scheme))?;
    Ok(timed(|| {
        let mut hits = 0;
        for op in ops {
            match *op {
                ArrayOp::Read(k) => hits += u64::from(a.read(k)),
                ArrayOp::Demote(k) => {
                    a.demote(k);
                }
            }
        }
        hits
    }))
}

/// Replay through the policy crate's LRU; returns (seconds, READ hits).
fn plain_lru(ops: &[ArrayOp], capacity: usize) -> (f64, u64) {
    let mut l = Lru::new(capacity);
    timed(|| {
        let mut hits = 0;
        for (i, op) in ops.iter().enumerate() {
            match *op {
                ArrayOp::Read(k) => hits += u64::from(l.access(&Access::read(k, i as u64)).0),
                ArrayOp::Demote(k) => {
                    l.access(&Access::read(k, i as u64));
                }
            }
        }
        hits
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clients = arg(1, 8) as u32;
    let requests = arg(2, 10_000_000);
    let runs = arg(3, 5).max(1) as usize;
    let w = requests / u64::from(clients) / 11;
    let common = Common { seed: 1, block_size: 4096, ..Common::default() };
    let t = MultiClientConfig::new(
        clients,
        w,
        Pattern::Zipf { alpha: 1.0 },
        Sharing::Partial { shared_fraction: 0.5 },
        common,
    )
    .trace()?;
    let reqs = &t.warmed.trace.requests;

    // The client side, once: LRU client caches of W/4 blocks; array keys by block index.
    let mut caches: Vec<Lru> = (0..clients).map(|_| Lru::new((w / 4) as usize)).collect();
    let mut ops = Vec::with_capacity(reqs.len() * 2);
    let mut client_hits = 0u64;
    let mut reads = 0u64;
    for r in reqs.iter().filter(|r| r.op == Op::Read) {
        for b in r.blocks(4096) {
            reads += 1;
            let key = block_key(r.volume, b);
            let (hit, ejected) = caches[r.volume as usize].access(&Access::read(key, 0));
            if hit {
                client_hits += 1;
                continue;
            }
            if let Some(victim) = ejected {
                ops.push(ArrayOp::Demote(key_block(victim)));
            }
            ops.push(ArrayOp::Read(b));
        }
    }
    drop(caches);
    let capacity = (w * u64::from(clients) / 4) as usize;
    let demotes = ops.iter().filter(|o| matches!(o, ArrayOp::Demote(_))).count();
    println!(
        "{clients} clients, {reads} READS ({:.1} % client hits), array stream of {} operations \
         ({} READs, {demotes} DEMOTEs), array of {capacity} blocks, {runs} runs",
        100.0 * client_hits as f64 / reads as f64,
        ops.len(),
        ops.len() - demotes
    );

    // The LRU replay is DEMOTE-LRU: its hits must equal the array cache's DEMOTE-LRU.
    let (_, lru_hits) = plain_lru(&ops, capacity);
    let (one_segment, demote_lru_hits) = adaptive(&ops, capacity, Scheme::DemoteLru)?;
    assert_eq!(lru_hits, demote_lru_hits, "the LRU replay is not DEMOTE-LRU");
    println!(
        "(for reference, untimed against the others: the array cache's own one-segment \
         DEMOTE-LRU took {one_segment:.3} s, {:.1} ns/op)",
        1e9 * one_segment / ops.len() as f64
    );

    let (mut ta, mut tl, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut exp_hits = 0;
    for run in 0..runs {
        // Alternate which structure runs first.
        let (a, l) = if run % 2 == 0 {
            let a = adaptive(&ops, capacity, Scheme::DemoteAdaptExp)?;
            (a, plain_lru(&ops, capacity))
        } else {
            let l = plain_lru(&ops, capacity);
            (adaptive(&ops, capacity, Scheme::DemoteAdaptExp)?, l)
        };
        exp_hits = a.1;
        println!(
            "run {}: DEMOTE-ADAPT-EXP array {:.3} s, LRU array {:.3} s, ratio {:.2}",
            run + 1,
            a.0,
            l.0,
            a.0 / l.0
        );
        ta.push(a.0);
        tl.push(l.0);
        ratios.push(a.0 / l.0);
    }
    let n = ops.len() as f64;
    let (ma, ml) = (median(&mut ta), median(&mut tl));
    println!(
        "DEMOTE-ADAPT-EXP array: median {ma:.3} s ({:.1} ns/op; min {:.3}, max {:.3}), \
         {:.2} % array hits",
        1e9 * ma / n,
        ta[0],
        ta[runs - 1],
        100.0 * exp_hits as f64 / reads as f64
    );
    println!(
        "LRU array (DEMOTE-LRU):  median {ml:.3} s ({:.1} ns/op; min {:.3}, max {:.3}), \
         {:.2} % array hits",
        1e9 * ml / n,
        tl[0],
        tl[runs - 1],
        100.0 * lru_hits as f64 / reads as f64
    );
    let mr = median(&mut ratios);
    println!("adaptive / LRU per run: min {:.2}, max {:.2}", ratios[0], ratios[runs - 1]);
    println!("ratio: {mr:.2}");
    Ok(())
}
