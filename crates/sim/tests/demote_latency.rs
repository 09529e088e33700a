//! Wong & Wilkes, *My cache or yours?*, USENIX ATC 2002: mean READ latencies of the
//! single-client synthetic workloads through equations 1–3 (Table 3's speedups) and the SAN
//! bandwidth sensitivity of section 3.5 (Figure 5).
//!
//! Table 3 came from Pantheon, with disk read-ahead and contention, not from the equations, so
//! absolute latencies differ (docs/reproductions.md lists both); the speedups of RANDOM and ZIPF,
//! which the array hit rates dominate, are reproduced within 10 %.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_policy::demote::{ArrayConfig, Scheme};
use ember_sim::demote::latency_model::{
    speedup, LatencyModel, PAPER_SAN_BITS_PER_S, PAPER_SYNTHETIC,
};
use ember_sim::demote::topology::{
    simulate_demote, ArrayAddressing, ClientCounters, ClientOf, DemoteConfig,
};
use ember_trace::gen::{ww_random, ww_zipf, WarmedTrace, WwConfig};

fn totals(w: &WarmedTrace, scheme: Scheme) -> ClientCounters {
    let config = DemoteConfig {
        clients: 1,
        client_blocks: 16384,
        array: ArrayConfig::new(16384, scheme),
        block_size: 4096,
        client_of: ClientOf::Volume,
        addressing: ArrayAddressing::Shared,
    };
    simulate_demote(&w.trace.requests, w.warmup_requests, &config).unwrap().total()
}

fn demote_speedup(w: &WarmedTrace, model: &LatencyModel) -> f64 {
    let none = model.mean_latency(&totals(w, Scheme::NoneLru));
    let demote = model.mean_latency(&totals(w, Scheme::Demote));
    speedup(none, demote)
}

#[test]
fn table_3_random_demote_speedup_7_5x() {
    let s = demote_speedup(&ww_random(&WwConfig::with_seed(1)).unwrap(), &PAPER_SYNTHETIC);
    eprintln!("RANDOM DEMOTE speedup {s:.3} (Table 3: 7.5x)");
    assert!((s - 7.5).abs() < 0.75, "{s}");
}

#[test]
fn table_3_zipf_demote_speedup_1_7x() {
    let s = demote_speedup(&ww_zipf(&WwConfig::with_seed(1)).unwrap(), &PAPER_SYNTHETIC);
    eprintln!("ZIPF DEMOTE speedup {s:.3} (Table 3: 1.7x)");
    assert!((s - 1.7).abs() < 0.17, "{s}");
}

#[test]
fn section_3_5_demote_wins_above_a_san_bandwidth_below_the_papers_20_to_30_mbit() {
    // Section 3.5 / Figure 5: "at very low effective SAN bandwidths (less than 20–30 Mbit/s),
    // NONE-LRU outperformed DEMOTE, but DEMOTE won as soon as the bandwidth rose above this
    // threshold". T_a = overhead + 4 KiB transfer; the overhead gives 0.2 ms at 1 Gbit/s.
    let w = ww_random(&WwConfig::with_seed(1)).unwrap();
    let none = totals(&w, Scheme::NoneLru);
    let demote = totals(&w, Scheme::Demote);
    let overhead = LatencyModel::overhead_for(0.2, PAPER_SAN_BITS_PER_S, 4096);
    let gain = |mbit: f64| {
        let m = LatencyModel::from_san(mbit * 1e6, overhead, 4096, 0.0, 10.0);
        speedup(m.mean_latency(&none), m.mean_latency(&demote))
    };
    assert!(gain(10_000.0) > 7.5 && gain(1000.0) > 7.0 && gain(100.0) > 3.0);
    assert!(gain(1.0) < 1.0, "{}", gain(1.0));
    // The crossover, by bisection on a log scale.
    let (mut lo, mut hi) = (1.0f64, 100.0f64);
    for _ in 0..50 {
        let mid = (lo * hi).sqrt();
        if gain(mid) < 1.0 {
            lo = mid
        } else {
            hi = mid
        }
    }
    // The same crossover in closed form: with T_c = 0, a mean latency is T_a (h_a + miss +
    // demoted) + T_d miss + T_abort aborted, T_a = overhead + x and x = 32.768 / Mbit ms, so
    // equal latencies give x = (T_d (miss_n - miss_d) - overhead aborted_d) / (A_d - A_n) -
    // overhead, with A = h_a + miss + demoted.
    let a = |c: &ember_sim::demote::topology::ClientCounters| {
        c.array_hit_rate() + c.miss_rate() + c.demotion_rate()
    };
    let x = (10.0 * (none.miss_rate() - demote.miss_rate())
        - overhead * demote.aborted_demotion_rate())
        / (a(&demote) - a(&none))
        - overhead;
    let closed = 32.768 / x;
    eprintln!(
        "RANDOM: DEMOTE beats NONE-LRU above {hi:.2} Mbit/s (closed form {closed:.2}; \
         paper: 20-30 Mbit/s)"
    );
    assert!((hi - closed).abs() < 0.01 * closed, "bisection {hi} vs closed form {closed}");
    // The gap, stated: the equations carry no queueing (the SAN is busy only for the
    // transfers themselves), so the crossover sits well below the paper's Pantheon figure of
    // 20-30 Mbit/s (docs/reference/laboratory.md). ember does not reproduce that figure.
    assert!(hi < 20.0, "{hi}");
    // REGRESSION PIN, not a paper number: ember's equations gave 3.94 Mbit/s (seed 1) when
    // this was written.
    assert!((hi - 3.94).abs() < 0.2, "crossover {hi:.2} Mbit/s (pin: 3.94)");
}
