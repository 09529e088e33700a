//! Micro-benchmark of the replacement policies: M accesses/s on a Zipf trace, in release.
//!
//! ```text
//! cargo run --release -p ember-policy --example policy_speed -- \
//!     [--keys FILE] [--requests 10000000] [--universe 1000000] [--alpha 0.9] \
//!     [--policies lru,fifo,...] [--capacities 10000,100000] [--repeat 3] [--prefetch 0]
//! ```
//! Without `--keys` it draws a Zipf(`alpha`) trace over `universe` blocks (fixed seed); with
//! it, it reads little-endian `u64` keys (the same file `tests/peer/` feeds libCacheSim).
//! Each policy runs through [`with_replacement!`] (a monomorphized loop, as the simulator
//! does); the best of `--repeat` runs is reported, by wall clock and by the thread's on-CPU
//! time (`/proc/thread-self/schedstat`, Linux; steadier on a shared machine), with the miss
//! ratio and the policy's own memory per block of capacity.

use ember_policy::replacement::{next_vtimes, Kind, Spec};
use ember_policy::{with_replacement, Access, Replacement};
use std::process::ExitCode;
use std::time::Instant;

struct Args {
    keys: Option<String>,
    requests: usize,
    universe: usize,
    alpha: f64,
    policies: Vec<Spec>,
    capacities: Vec<usize>,
    repeat: usize,
    prefetch: usize,
}

fn parse_list<T: std::str::FromStr>(flag: &str, v: &str) -> Result<Vec<T>, String>
where
    T::Err: std::fmt::Display,
{
    v.split(',').map(|x| x.parse::<T>().map_err(|e| format!("{flag} `{x}`: {e}"))).collect()
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        keys: None,
        requests: 10_000_000,
        universe: 1_000_000,
        alpha: 0.9,
        policies: vec![Kind::Lru.into(), Kind::Fifo.into()],
        capacities: vec![10_000, 100_000],
        repeat: 3,
        prefetch: 0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag}: missing value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} `{v}`: {e}"));
        match flag.as_str() {
            "--keys" => a.keys = Some(v.clone()),
            "--requests" => a.requests = num(v)?,
            "--universe" => a.universe = num(v)?.max(1),
            "--alpha" => a.alpha = v.parse().map_err(|e| format!("{flag} `{v}`: {e}"))?,
            "--policies" => {
                a.policies = if v == "all" {
                    Kind::ALL.iter().map(|&k| k.into()).collect()
                } else {
                    parse_list(flag, v)?
                }
            }
            "--capacities" => a.capacities = parse_list(flag, v)?,
            "--repeat" => a.repeat = num(v)?.max(1),
            "--prefetch" => a.prefetch = num(v)?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

/// Zipf(alpha) over `universe` ranks by inverse CDF; ranks scrambled into keys.
fn zipf_keys(requests: usize, universe: usize, alpha: f64) -> Vec<u64> {
    let mut cdf = Vec::with_capacity(universe);
    let mut sum = 0.0;
    for r in 1..=universe {
        sum += (r as f64).powf(-alpha);
        cdf.push(sum);
    }
    let mut x: u64 = 0x853C_49E6_748F_EA9B;
    (0..requests)
        .map(|_| {
            // splitmix64
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let u = (z >> 11) as f64 / (1u64 << 53) as f64 * sum;
            let rank = cdf.partition_point(|&c| c < u) as u64;
            rank.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 20
        })
        .collect()
}

/// Nanoseconds this thread has run on a CPU (0 where `/proc/thread-self/schedstat` is absent).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0)
}

fn read_keys(path: &str) -> Result<Vec<u64>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    if bytes.len() % 8 != 0 {
        return Err(format!("{path}: {} bytes is not a whole number of u64 keys", bytes.len()));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

fn run() -> Result<(), String> {
    let a = parse_args()?;
    let keys = match &a.keys {
        Some(p) => read_keys(p)?,
        None => zipf_keys(a.requests, a.universe, a.alpha),
    };
    let prefetch = a.prefetch;
    let next =
        if a.policies.iter().any(|k| k.needs_oracle()) { next_vtimes(&keys) } else { Vec::new() };
    println!("{} requests", keys.len());
    println!(
        "{:<7} {:>9} {:>10} {:>10} {:>10} {:>12}",
        "policy", "capacity", "Macc/s", "cpuMacc/s", "miss", "bytes/block"
    );
    for &kind in &a.policies {
        for &cap in &a.capacities {
            let mut best = f64::INFINITY;
            let mut best_cpu = f64::INFINITY;
            let mut misses = 0usize;
            let mut bytes = 0usize;
            for _ in 0..a.repeat {
                let cpu0 = cpu_ns();
                let (secs, m, b) = with_replacement!(kind, cap, |p| {
                    let start = Instant::now();
                    let mut m = 0usize;
                    if kind.needs_oracle() {
                        for (t, &k) in keys.iter().enumerate() {
                            let acc = Access { next_vtime: next[t], ..Access::read(k, t as u64) };
                            m += usize::from(!p.access(&acc).0);
                        }
                    } else if prefetch > 0 {
                        for (t, &k) in keys.iter().enumerate() {
                            if let Some(&ahead) = keys.get(t + prefetch) {
                                p.prefetch(ahead);
                            }
                            m += usize::from(!p.access(&Access::read(k, t as u64)).0);
                        }
                    } else {
                        for (t, &k) in keys.iter().enumerate() {
                            m += usize::from(!p.access(&Access::read(k, t as u64)).0);
                        }
                    }
                    (start.elapsed().as_secs_f64(), m, p.memory_bytes())
                });
                best = best.min(secs);
                best_cpu = best_cpu.min((cpu_ns() - cpu0) as f64 / 1e9);
                misses = m;
                bytes = b;
            }
            println!(
                "{:<7} {:>9} {:>10.1} {:>10.1} {:>10.4} {:>12.1}",
                kind.to_string(),
                cap,
                keys.len() as f64 / best / 1e6,
                keys.len() as f64 / best_cpu / 1e6,
                misses as f64 / keys.len() as f64,
                bytes as f64 / cap.max(1) as f64
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("policy_speed: {e}");
            ExitCode::FAILURE
        }
    }
}
