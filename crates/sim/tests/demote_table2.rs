//! Wong & Wilkes, *My cache or yours?*, USENIX ATC 2002, Table 2: client and array hit rates
//! of the single-client synthetic workloads RANDOM (section 3.2), SEQ (3.3) and ZIPF (3.4),
//! N_c = N_a = 16384 blocks, a working set of warm-up READS then 10x timed READS.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_policy::demote::{ArrayConfig, Scheme};
use ember_sim::demote::latency_model::{speedup, PAPER_SYNTHETIC};
use ember_sim::demote::topology::{
    simulate_demote, ArrayAddressing, ClientOf, DemoteConfig, DemoteResult,
};
use ember_trace::gen::{ww_random, ww_seq, ww_zipf, WarmedTrace, WwConfig};

fn run(w: &WarmedTrace, scheme: Scheme) -> DemoteResult {
    run_with(w, 16384, ArrayConfig::new(16384, scheme))
}

fn run_with(w: &WarmedTrace, client_blocks: usize, array: ArrayConfig) -> DemoteResult {
    let config = DemoteConfig {
        clients: 1,
        client_blocks,
        array,
        block_size: 4096,
        client_of: ClientOf::Volume,
        addressing: ArrayAddressing::Shared,
    };
    simulate_demote(&w.trace.requests, w.warmup_requests, &config).unwrap()
}

/// (client, NONE-LRU, DEMOTE-LRU, DEMOTE) hit rates in percent.
fn table_2_row(w: &WarmedTrace) -> [f64; 4] {
    let none = run(w, Scheme::NoneLru).total();
    let dlru = run(w, Scheme::DemoteLru).total();
    let demote = run(w, Scheme::Demote).total();
    // Table 2: "The client hit rates are the same for all the demotion variants".
    assert_eq!(none.client_hits, dlru.client_hits);
    assert_eq!(none.client_hits, demote.client_hits);
    let m = PAPER_SYNTHETIC;
    eprintln!(
        "latency NONE-LRU {:.3} DEMOTE-LRU {:.3} DEMOTE {:.3} ms; speedup DEMOTE {:.2}",
        m.mean_latency(&none),
        m.mean_latency(&dlru),
        m.mean_latency(&demote),
        speedup(m.mean_latency(&none), m.mean_latency(&demote))
    );
    let row = [
        100.0 * none.client_hit_rate(),
        100.0 * none.array_hit_rate(),
        100.0 * dlru.array_hit_rate(),
        100.0 * demote.array_hit_rate(),
    ];
    eprintln!("table 2 row (client, NONE-LRU, DEMOTE-LRU, DEMOTE): {row:.2?}");
    row
}

fn assert_within(row: [f64; 4], paper: [f64; 4], tol: [f64; 4]) {
    for k in 0..4 {
        assert!(
            (row[k] - paper[k]).abs() <= tol[k],
            "column {k}: measured {:.2} %, paper {} % (row {row:.2?})",
            row[k],
            paper[k]
        );
    }
}

/// Table 2's ordering of the array columns: NONE-LRU < DEMOTE-LRU < DEMOTE, each step by a
/// clear margin (a factor `gain`), so that a scheme that behaves like another cannot pass.
fn assert_ordered(row: [f64; 4], gain: f64) {
    assert!(row[2] > gain * row[1], "DEMOTE-LRU {:.2} % vs NONE-LRU {:.2} %", row[2], row[1]);
    assert!(row[3] > gain * row[2], "DEMOTE {:.2} % vs DEMOTE-LRU {:.2} %", row[3], row[2]);
}

#[test]
fn table_2_random_client_50_array_8_21_46() {
    // Measured 50.02, 8.36, 21.57, 46.34: within 1.5 points of every column, and ordered.
    let row = table_2_row(&ww_random(&WwConfig::with_seed(1)).unwrap());
    assert_within(row, [50.0, 8.0, 21.0, 46.0], [1.0, 1.5, 1.5, 1.5]);
    assert_ordered(row, 2.0);
}

#[test]
fn table_2_seq_client_0_array_0_0_100() {
    // Exact by construction (a loop of N_c + N_a - 1 blocks; docs/reference/laboratory.md).
    let row = table_2_row(&ww_seq(&WwConfig::with_seed(1)).unwrap());
    assert_within(row, [0.0, 0.0, 0.0, 100.0], [0.5; 4]);
}

#[test]
fn table_2_zipf_client_86_array_2_4_9() {
    // Measured 86.18, 1.96, 4.07, 6.92. The client, NONE-LRU and DEMOTE-LRU columns are held
    // to 1 point (NONE-LRU must hit: an array that never hits fails), and the ordering to a
    // factor 1.5 (DEMOTE-LRU about twice NONE-LRU, as in the paper).
    //
    // The DEMOTE column falls short of the paper's 9 % by about 2 points. DEMOTE makes client
    // and array one LRU cache of N_c + N_a blocks (checked below); in steady state such a
    // cache hits 94.95 % of Zipf(1) READS over 49152 blocks (Che's approximation, computed in
    // `table_2_zipf_demote_is_bounded_by_one_unified_lru`), i.e. 86 % + 9 %, the paper's
    // row. The generated trace has only 11 x 49152 READS, and about 5.9 % of its timed READS
    // are first references (expected count, computed there too), which no cache can hit; so
    // DEMOTE reaches about 7 % here, and this column gets 2.5 points (6.5-11.5 %).
    let row = table_2_row(&ww_zipf(&WwConfig::with_seed(1)).unwrap());
    assert_within(row, [86.0, 2.0, 4.0, 9.0], [1.0, 1.0, 1.0, 2.5]);
    assert_ordered(row, 1.5);
}

#[test]
fn table_2_demote_lru_column_needs_lru_refresh_on_aborted_demotes() {
    // Table 2's DEMOTE-LRU column (RANDOM 21 %, ZIPF 4 %) is reproduced only when a DEMOTE of
    // a block the array already holds still counts as an LRU reference (section 1.2: "the
    // traditional LRU cache management for both demoted and recently read blocks"). Leaving
    // the block where it is falls well short of the paper's 21 %.
    let w = ww_random(&WwConfig::with_seed(1)).unwrap();
    let frozen =
        ArrayConfig { refresh_aborted: false, ..ArrayConfig::new(16384, Scheme::DemoteLru) };
    let h_a = 100.0 * run_with(&w, 16384, frozen).total().array_hit_rate();
    assert!(h_a < 21.0 - 5.0, "DEMOTE-LRU without refresh reaches the paper: {h_a:.2} %");
    // REGRESSION PIN, not a paper number: 13.6 % is what ember itself gave when this was
    // written (seed 1); it guards the simulator against unnoticed change, nothing more.
    assert!((h_a - 13.6).abs() < 0.5, "DEMOTE-LRU without refresh: {h_a:.2} % (pin: 13.6 %)");
}

/// Zipf(1) popularities of blocks 1..=n.
fn zipf_p(n: usize) -> Vec<f64> {
    let h: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
    (1..=n).map(|i| 1.0 / (i as f64 * h)).collect()
}

/// Che's approximation of the steady-state hit rate of an LRU cache of `c` blocks under
/// independent references with popularities `p`: the characteristic time T solves
/// sum(1 - exp(-p_i T)) = c, and the hit rate is sum(p_i (1 - exp(-p_i T))).
fn che_hit_rate(p: &[f64], c: f64) -> f64 {
    let filled = |t: f64| p.iter().map(|&q| 1.0 - (-q * t).exp()).sum::<f64>();
    let (mut lo, mut hi) = (0.0f64, 1e12f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if filled(mid) < c {
            lo = mid
        } else {
            hi = mid
        }
    }
    p.iter().map(|&q| q * (1.0 - (-q * lo).exp())).sum()
}

#[test]
fn table_2_zipf_demote_is_bounded_by_one_unified_lru() {
    // Why ZIPF's DEMOTE column reads about 7 % rather than the paper's 9 %. DEMOTE makes the
    // two caches behave as one LRU cache of N_c + N_a = 32768 blocks (section 1.2: "most
    // closely approximates the effect of a single unified LRU cache"): checked first. Both
    // bounds on that cache come from the Zipf law, independently of the simulator: Che's
    // approximation gives its steady-state hit rate (94.95 %, the paper's 86 % + 9 %), which
    // a finite trace cannot beat; and it cannot fall below that by more than the share of
    // timed READS that are first references (expected 5.9 % of the 10 x 49152 timed READS:
    // blocks unseen in the 49152 warm-up READS).
    let w = ww_zipf(&WwConfig::with_seed(1)).unwrap();
    let demote = run(&w, Scheme::Demote).total();
    let unified = run_with(&w, 32768, ArrayConfig::new(0, Scheme::NoneLru)).total();
    let total = demote.client_hit_rate() + demote.array_hit_rate();
    let n = w.working_set_blocks as usize;
    let p = zipf_p(n);
    let steady = che_hit_rate(&p, 32768.0);
    let distinct = |m: f64| p.iter().map(|&q| 1.0 - (1.0 - q).powf(m)).sum::<f64>();
    let timed = (w.trace.requests.len() - w.warmup_requests) as f64;
    let first_refs = (distinct(w.trace.requests.len() as f64) - distinct(n as f64)) / timed;
    let u = unified.client_hit_rate();
    eprintln!(
        "DEMOTE total {total:.4}, unified LRU {u:.4}; Che steady state {steady:.4}, \
         first references {first_refs:.4} of timed READS"
    );
    assert!((total - u).abs() < 0.01, "DEMOTE {total:.4} vs one unified LRU {u:.4}");
    assert!((steady - 0.95).abs() < 0.005, "Che: {steady:.4}");
    assert!(u < steady && u > steady - first_refs, "unified LRU {u:.4}");
}
