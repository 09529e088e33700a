//! Wong & Wilkes, *My cache or yours?*, USENIX ATC 2002, Table 2: client and array hit rates
//! of the single-client synthetic workloads RANDOM (section 3.2), SEQ (3.3) and ZIPF (3.4),
//! N_c = N_a = 16384 blocks, a working set of warm-up READS then 10x timed READS.

use ember_policy::demote::{ArrayConfig, Scheme};
use ember_sim::hierarchy::{
    simulate_hierarchy, ArrayAddressing, ClientOf, HierarchyConfig, HierarchyResult,
};
use ember_sim::latency_model::{speedup, PAPER_SYNTHETIC};
use ember_trace::gen::{ww_random, ww_seq, ww_zipf, WarmedTrace, WwConfig};

fn run(w: &WarmedTrace, scheme: Scheme) -> HierarchyResult {
    run_with(w, 16384, ArrayConfig::new(16384, scheme))
}

fn run_with(w: &WarmedTrace, client_blocks: usize, array: ArrayConfig) -> HierarchyResult {
    let config = HierarchyConfig {
        clients: 1,
        client_blocks,
        array,
        block_size: 4096,
        client_of: ClientOf::Volume,
        addressing: ArrayAddressing::Shared,
    };
    simulate_hierarchy(&w.trace.requests, w.warmup_requests, &config).unwrap()
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

#[test]
fn table_2_random_client_50_array_8_21_46() {
    let row = table_2_row(&ww_random(&WwConfig::with_seed(1)).unwrap());
    assert_within(row, [50.0, 8.0, 21.0, 46.0], [3.0; 4]);
}

#[test]
fn table_2_seq_client_0_array_0_0_100() {
    let row = table_2_row(&ww_seq(&WwConfig::with_seed(1)).unwrap());
    assert_within(row, [0.0, 0.0, 0.0, 100.0], [3.0; 4]);
}

#[test]
fn table_2_zipf_client_86_array_2_4_9() {
    let row = table_2_row(&ww_zipf(&WwConfig::with_seed(1)).unwrap());
    assert_within(row, [86.0, 2.0, 4.0, 9.0], [3.0; 4]);
}

#[test]
fn table_2_demote_lru_column_needs_lru_refresh_on_aborted_demotes() {
    // Table 2's DEMOTE-LRU column (RANDOM 21 %, ZIPF 4 %) is reproduced only when a DEMOTE of
    // a block the array already holds still counts as an LRU reference (section 1.2: "the
    // traditional LRU cache management for both demoted and recently read blocks"). Leaving
    // the block where it is gives about 13.6 % on RANDOM, well outside the paper's 21 %.
    let w = ww_random(&WwConfig::with_seed(1)).unwrap();
    let frozen =
        ArrayConfig { refresh_aborted: false, ..ArrayConfig::new(16384, Scheme::DemoteLru) };
    let h_a = 100.0 * run_with(&w, 16384, frozen).total().array_hit_rate();
    assert!((h_a - 13.6).abs() < 1.5, "DEMOTE-LRU without refresh: {h_a:.2} %");
}

#[test]
fn table_2_zipf_demote_is_bounded_by_one_unified_lru() {
    // Why ZIPF's DEMOTE column reads about 7 % rather than the paper's 9 %: DEMOTE makes the
    // two caches behave as one LRU cache of N_c + N_a = 32768 blocks (section 1.2: "most
    // closely approximates the effect of a single unified LRU cache"), and such a cache hits
    // about 93 % of these READS, so with h_c = 86 % at most about 7 % is left for the array.
    // The paper's 86 % + 9 % = 95 % exceeds what one 32768-block LRU achieves here (section
    // 3.4 itself expects "h_a = 6 % in steady state").
    let w = ww_zipf(&WwConfig::with_seed(1)).unwrap();
    let demote = run(&w, Scheme::Demote).total();
    let unified = run_with(&w, 32768, ArrayConfig::new(0, Scheme::NoneLru)).total();
    let total = demote.client_hit_rate() + demote.array_hit_rate();
    eprintln!("DEMOTE total {total:.4}, unified LRU {:.4}", unified.client_hit_rate());
    assert!((total - unified.client_hit_rate()).abs() < 0.01);
    assert!(unified.client_hit_rate() < 0.94);
}
