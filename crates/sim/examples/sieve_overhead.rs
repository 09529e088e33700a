//! SieveStore-C's cost over plain AOD in the same run (bench/sieve-overhead): both under the
//! same fully-associative LRU cache over 10 million requests of the generated ensemble
//! workload. Prints each time (best of 3, interleaved) and `ratio: X` (SieveStore-C / AOD)
//! last; the target is at most 1.5. Times are this thread's CPU time (from
//! `/proc/thread-self/schedstat`), so other load on a shared 2-core machine inflates neither
//! side; without that file (not Linux), wall time.

use ember_policy::admission::SieveSpec;
use ember_sim::sievestore::experiment::default_capacity;
use ember_sim::sievestore::{day_origin, run_sieve};
use ember_trace::gen::ensemble::{generate, EnsembleConfig};
use std::time::Instant;

/// Seconds of CPU this thread has used, if the kernel tells (first field of schedstat, ns).
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Seconds `f` takes: thread CPU time where available, else wall time.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let (cpu0, wall0) = (thread_cpu_seconds(), Instant::now());
    let out = f();
    let secs = match (cpu0, thread_cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => wall0.elapsed().as_secs_f64(),
    };
    (out, secs)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let requests: usize =
        std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(10_000_000);
    // About 0.87 requests per block access (cold scans are multi-block).
    let days = 4u32;
    let per_day = (requests as f64 / 0.85 / days as f64).ceil() as u64;
    let cfg =
        EnsembleConfig { days, accesses_per_day: per_day, ..EnsembleConfig::with_volumes(36) };
    let t0 = Instant::now();
    let mut trace = generate(&cfg)?;
    if trace.requests.len() < requests {
        return Err(format!("generated only {} requests", trace.requests.len()).into());
    }
    trace.requests.truncate(requests);
    let cap = default_capacity(&trace, 4096);
    let origin = day_origin(&trace.requests);
    let blocks: u64 = trace.requests.iter().map(|r| r.blocks(4096).count() as u64).sum();
    println!(
        "trace: {} requests, {} block accesses, cache {} blocks (generated in {:.1}s)",
        trace.requests.len(),
        blocks,
        cap,
        t0.elapsed().as_secs_f64()
    );
    let aod = SieveSpec::Aod;
    let ssc: SieveSpec = "sievestore-c".parse()?;
    let mut best = [f64::MAX; 2];
    let mut hits = [0u64; 2];
    for round in 0..3 {
        for (i, spec) in [&aod, &ssc].into_iter().enumerate() {
            let (r, s) = timed(|| run_sieve(&trace.requests, 4096, origin, cap, spec));
            let r = r?;
            best[i] = best[i].min(s);
            hits[i] = r.total().hits();
            println!("round {round} {:<13} {s:.3}s  hit ratio {:.4}", spec.name(), r.hit_ratio());
        }
    }
    let clock = if thread_cpu_seconds().is_some() { "thread CPU time" } else { "wall time" };
    println!("aod: {:.3}s {clock} (hits {})", best[0], hits[0]);
    println!("sievestore-c: {:.3}s {clock} (hits {})", best[1], hits[1]);
    println!("ratio: {:.3}", best[1] / best[0]);
    Ok(())
}
