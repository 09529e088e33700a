//! Multi-client behaviour reported by Wong & Wilkes, *My cache or yours?*, USENIX ATC 2002,
//! section 5, asserted on generated workloads (section 5.1's system: N clients, each with
//! 1/N of the client memory, over one array; latencies by equations 2 and 3 with T_a = 0.2 ms,
//! T_d = 5 ms, aborted DEMOTE 0.16 ms, as in tables 7, 9 and 10).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_policy::demote::{ArrayConfig, Scheme};
use ember_sim::demote::experiment::{DemoteExperiment, DemoteReport};
use ember_sim::demote::latency_model::PAPER_REAL;
use ember_sim::demote::topology::{ArrayAddressing, ClientOf, DemoteConfig};
use ember_testkit::lagged_blocks;
use ember_trace::gen::multi_client::{MultiClientConfig, Pattern, Sharing};
use ember_trace::gen::{Common, ZipfConfig};
use ember_trace::{Op, Request};

const SCHEMES: [Scheme; 3] = [Scheme::NoneLru, Scheme::Demote, Scheme::DemoteAdaptExp];

fn run(requests: &[Request], warmup: usize, clients: usize, cb: usize, ab: usize) -> DemoteReport {
    let exp = DemoteExperiment {
        base: DemoteConfig {
            clients,
            client_blocks: cb,
            array: ArrayConfig::new(ab, Scheme::NoneLru),
            block_size: 4096,
            client_of: ClientOf::Volume,
            addressing: ArrayAddressing::Shared,
        },
        schemes: SCHEMES.to_vec(),
        model: PAPER_REAL,
        sweep_array_blocks: vec![],
        threads: 2,
    };
    let r = exp.run(requests, warmup).unwrap();
    for s in &r.schemes {
        eprintln!(
            "{}: mean speedup {:.3}, h_c {:.2} %, h_a {:.2} %",
            s.scheme,
            s.mean_speedup,
            100.0 * s.result.total().client_hit_rate(),
            100.0 * s.result.total().array_hit_rate()
        );
    }
    r
}

fn generated(sharing: Sharing, w: u64) -> (Vec<Request>, usize) {
    let common = Common { seed: 7, block_size: 4096, ..Common::default() };
    let t = MultiClientConfig::new(4, w, Pattern::Zipf { alpha: 1.0 }, sharing, common)
        .trace()
        .unwrap();
    (t.warmed.trace.requests, t.warmed.warmup_requests)
}

fn speedup(r: &DemoteReport, s: Scheme) -> f64 {
    r.scheme(s).unwrap().mean_speedup
}

fn h_a(r: &DemoteReport, s: Scheme) -> f64 {
    r.scheme(s).unwrap().result.total().array_hit_rate()
}

#[test]
fn section_5_2_disjoint_clients_demote_beats_none_lru() {
    // Sections 5 and 5.2 (DB2, table 7: DEMOTE mean speedup 1.50x): disjoint clients "appear
    // to the array as if one client had issued them", so exclusive caching pays. Four Zipf
    // clients of 8192 blocks each, 2048-block client caches, an 8192-block array.
    // Measured 1.53 (DEMOTE) and 1.21 (DEMOTE-ADAPT-EXP) against the paper's 1.50 and 1.32:
    // each held to 0.15 of the paper's value.
    let (reqs, warmup) = generated(Sharing::Disjoint, 8192);
    let r = run(&reqs, warmup, 4, 2048, 8192);
    let demote = speedup(&r, Scheme::Demote);
    assert!((demote - 1.50).abs() <= 0.15, "DEMOTE {demote} (table 7: 1.50x)");
    assert!(h_a(&r, Scheme::Demote) > 3.0 * h_a(&r, Scheme::NoneLru));
    // Section 5.2: the adaptive scheme also gains, but less than DEMOTE (1.32x vs 1.50x).
    let exp = speedup(&r, Scheme::DemoteAdaptExp);
    assert!((exp - 1.32).abs() <= 0.15, "DEMOTE-ADAPT-EXP {exp} (table 7: 1.32x)");
    assert!(exp < demote, "DEMOTE-ADAPT-EXP {exp} vs DEMOTE {demote}");
    // Every client gains under DEMOTE.
    assert!(r.scheme(Scheme::Demote).unwrap().speedup.iter().all(|&s| s > 1.0));
}

#[test]
fn section_5_1_shared_clients_demote_loses_and_adapt_exp_recovers_most() {
    // Section 5.1: "workloads in which clients shared blocks performed worse with DEMOTE than
    // with NONE-LRU, because shared workloads are not conjoint in practice". Four clients
    // drawing independent Zipf streams over one fully shared set of 16384 blocks, 2048-block
    // client caches, an 8192-block array.
    let (reqs, warmup) = generated(Sharing::Partial { shared_fraction: 1.0 }, 16384);
    let r = run(&reqs, warmup, 4, 2048, 8192);
    let demote = speedup(&r, Scheme::Demote);
    let adapt = speedup(&r, Scheme::DemoteAdaptExp);
    assert!(demote < 0.9, "DEMOTE {demote}");
    // DEMOTE-ADAPT-EXP keeps the array hit rate of NONE-LRU and recovers at least two thirds
    // of DEMOTE's loss; what remains is the cost of the DEMOTEs themselves (every client miss
    // sends one), which no insertion policy can win back when NONE-LRU is already nearly
    // exclusive (the clients all cache the same popular blocks).
    assert!(h_a(&r, Scheme::DemoteAdaptExp) >= h_a(&r, Scheme::NoneLru) - 0.002);
    assert!(adapt - demote > (2.0 / 3.0) * (1.0 - demote), "ADAPT-EXP {adapt} vs DEMOTE {demote}");
}

/// Four clients, each alternating between a shared Zipf stream that it replays `lag` requests
/// behind the client before it (client 0 leads: a READ for block X by one client "followed by
/// several READS for other blocks before a second READ for X by another client", section 5.1)
/// and a private Zipf stream of its own. 8192-block working sets.
fn lagged_half_shared(lag: usize) -> (Vec<Request>, usize) {
    let (n, w) = (4usize, 8192u64);
    let len = 11 * w as usize;
    let common = Common { seed: 3, block_size: 4096, ..Common::default() };
    let z = ZipfConfig::new(1.0, w, (len + n * lag) as u64, common).trace().unwrap();
    let base: Vec<u64> = z.requests.iter().map(|r| r.offset / 4096).collect();
    let reqs = lagged_blocks(&base, n, w, lag, len)
        .into_iter()
        .enumerate()
        .map(|(i, (k, block))| Request {
            time_ns: (i / n) as u64,
            volume: k as u32,
            op: Op::Read,
            offset: block * 4096,
            length: 4096,
        })
        .collect();
    (reqs, n * w as usize)
}

#[test]
fn section_5_3_lagged_sharing_demote_loses_and_adapt_exp_recovers_the_loss_but_not_the_gain() {
    // Section 5.3 (HTTPD, table 9): clients sharing blocks at different times; DEMOTE's
    // mean slowdown 0.55x, DEMOTE-ADAPT-EXP 1.18x. Here DEMOTE throws read blocks away before
    // the next client asks for them; the read ghost sees those re-reads and DEMOTE-ADAPT-EXP
    // inserts read blocks high enough to keep them.
    //
    // The gap, stated: ember's DEMOTE-ADAPT-EXP recovers DEMOTE's loss (measured 0.998x
    // against DEMOTE's 0.69x) but does not reach the paper's gain of 1.18x over NONE-LRU on
    // this workload (docs/guide/demote.md says why); the paper's gain is therefore not asserted.
    let (reqs, warmup) = lagged_half_shared(1000);
    let r = run(&reqs, warmup, 4, 2048, 8192);
    let demote = speedup(&r, Scheme::Demote);
    let adapt = speedup(&r, Scheme::DemoteAdaptExp);
    assert!(demote < 0.8, "DEMOTE {demote}");
    assert!(adapt > 0.98, "DEMOTE-ADAPT-EXP {adapt}");
    assert!(adapt - demote > 0.25, "DEMOTE-ADAPT-EXP {adapt} vs DEMOTE {demote}");
    assert!(h_a(&r, Scheme::DemoteAdaptExp) > h_a(&r, Scheme::NoneLru));
    let g = r.scheme(Scheme::DemoteAdaptExp).unwrap();
    assert!(g.speedup.iter().all(|&s| s > 0.9), "per client {:?}", g.speedup);
}
