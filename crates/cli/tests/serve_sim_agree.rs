//! One brain (the house's rule 7): a block-aligned trace replayed through the real
//! `ember serve` at queue depth 1 gives exactly the read hits, write hits and
//! allocation-writes that the laboratory (`ember sievestore`, which runs the same policy code
//! as `ember sim`) predicts for the same replacement policy, sieve and capacity.
//!
//! Write policies map onto the simulator as follows: write-through and the write-back
//! policies allocate write misses the sieve admits (so they match the sieve itself);
//! write-around never allocates a write miss (so it matches WMNA under AOD). The write-back
//! policies (ordered write-back too: it allocates and sieves write misses as they do, only
//! its flush order and barriers differ) agree within 1 % rather than exactly; the test says
//! why.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::process::Command;
use std::time::Duration;

/// A skewed, block-aligned trace on volume "disk" (a 4 MiB volume): 1-4 blocks per
/// request, 30 % writes, 80 % of the requests on a hot eighth of the blocks.
fn skewed_trace(n: usize, seed: u64) -> Vec<Req> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let hot = rng.below(10) < 8;
            let block = if hot { rng.below(128) } else { rng.below(1024) };
            let len = 1 + rng.below(4).min(1023 - block);
            ("disk".to_string(), rng.below(10) < 3, block * 4096, (len * 4096) as u32)
        })
        .collect()
}

/// (read hits, write hits, allocation-writes) of `ember serve` after the replay, and its
/// capacity in blocks.
fn served(
    dir: &std::path::Path,
    trace: &std::path::Path,
    args: &[&str],
    replay: &[&str],
) -> ([u64; 3], u64) {
    let (got, cap, _) = served_sized(dir, trace, "5M", args, replay);
    (got, cap)
}

/// [`served`] with a cache of `cache_size`; also the sequential cutoff's bypasses.
fn served_sized(
    dir: &std::path::Path,
    trace: &std::path::Path,
    cache_size: &str,
    args: &[&str],
    replay: &[&str],
) -> ([u64; 3], u64, u64) {
    let backing = dir.join("disk.img");
    sparse_file(&backing, 4 << 20);
    let cache = dir.join("cache.img");
    let _ = std::fs::remove_file(&cache);
    let mut all = vec![
        "--cache",
        cache.to_str().unwrap(),
        "--cache-size",
        cache_size,
        "--format-if-needed",
        "--backing",
    ];
    let spec = format!("disk={}", backing.display());
    all.push(&spec);
    all.extend_from_slice(args);
    let serve = Serve::start(&all);
    let uri = serve.uri("disk");
    let mut r_args = vec![
        trace.to_str().unwrap(),
        "--format",
        "csv",
        "--server",
        &uri,
        "--queue-depth",
        "1",
        "--connections",
        "1",
    ];
    r_args.extend_from_slice(replay);
    // Write-back: a dirty block cannot be evicted until the flusher wrote it, so the counters
    // depend on how far the flusher lags behind the client (see the tolerance below). The
    // flusher no longer stalls writes to the blocks it is writing, so a client replaying as
    // fast as it can outruns it by a margin that varies with the machine's load; paced at the
    // trace's timestamps (1 ms a request) it keeps up, as it did when it stalled the client.
    if args.iter().any(|a| a.contains("write-back")) && !replay.contains(&"--timing") {
        r_args.extend_from_slice(&["--timing", "trace"]);
    }
    let r = replay_json(&r_args);
    assert_eq!(r["verification"]["reads_failed"], 0, "{r:#}");
    let s = scrape(&serve.metrics);
    let got = [
        metric(&s, "ember_cache_read_hits_total") as u64,
        metric(&s, "ember_cache_write_hits_total") as u64,
        metric(&s, "ember_cache_allocation_writes_total") as u64,
    ];
    let cap = metric(&s, "ember_cache_capacity_blocks") as u64;
    let bypasses = metric(&s, "ember_cache_seq_cutoff_bypasses_total") as u64;
    serve.stop();
    (got, cap, bypasses)
}

/// (read hits, write hits, allocation-writes) that `ember sievestore` predicts.
fn predicted(
    trace: &std::path::Path,
    sieve: &str,
    policy: &str,
    cap: u64,
    extra: &[&str],
) -> [u64; 3] {
    let out = run(
        Command::new(ember())
            .args(["sievestore"])
            .arg(trace)
            .args([
                "--format",
                "csv",
                "--admission",
                sieve,
                "--policy",
                policy,
                "--size",
                &cap.to_string(),
                "--json",
                "/dev/stdout",
                "-q",
            ])
            .args(extra),
        Duration::from_secs(60),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let t = &v[0]["total"];
    ["read_hits", "write_hits", "allocation_writes"].map(|k| t[k].as_u64().unwrap())
}

#[test]
fn serve_at_queue_depth_1_gives_the_simulators_counters() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("skewed.csv");
    write_csv_trace(&trace, &skewed_trace(3000, 13));
    // SieveStore-C with lower thresholds than the paper's (the parameters
    // are flags of both): more blocks pass the sieve.
    let low: &[&str] = &["--sieve-t1", "2", "--sieve-t2", "1", "--sieve-window", "1h"];
    // libCacheSim's admission filters: the doorkeeper as a Bloom filter and as an exact set,
    // and the probabilistic filter at a probability other than its default.
    let exact: &[&str] = &["--bloom-fpr", "0", "--bloom-keys", "0"];
    let quarter: &[&str] = &["--admit-probability", "0.25"];
    // (write policy, serve's sieve, the simulator's sieve, policy, flags of both)
    let cases: [(&str, &str, &str, &str, &[&str]); 16] = [
        ("write-through", "aod", "aod", "lru", &[]),
        ("write-through", "wmna", "wmna", "lru", &[]),
        ("write-through", "aod", "aod", "arc", &[]),
        ("write-through", "sievestore-c", "sievestore-c", "lru", &[]),
        ("write-through", "sievestore-c", "sievestore-c", "lru", low),
        ("write-around", "aod", "wmna", "lru", &[]),
        ("write-back-flush", "aod", "aod", "lru", &[]),
        ("write-back-flush", "wmna", "wmna", "lru", &[]),
        ("write-back-persist", "aod", "aod", "lru", &[]),
        ("write-back-persist", "wmna", "wmna", "lru", &[]),
        ("ordered-write-back", "aod", "aod", "lru", &[]),
        ("ordered-write-back", "wmna", "wmna", "lru", &[]),
        ("write-through", "bloom", "bloom", "lru", &[]),
        ("write-through", "bloom", "bloom", "arc", exact),
        ("write-through", "prob", "prob", "lru", &[]),
        ("write-through", "prob", "prob", "s3fifo", quarter),
    ];
    let mut report = Vec::new();
    for (mode, sieve, sim_sieve, policy, extra) in cases {
        let mut args = vec!["--write-policy", mode, "--admission", sieve, "--policy", policy];
        args.extend_from_slice(extra);
        let (got, cap) = served(dir.path(), &trace, &args, &[]);
        let want = predicted(&trace, sim_sieve, policy, cap, extra);
        assert!(got[0] > 100, "{mode} {sieve} {policy}: the trace must hit: {got:?}");
        report.push(format!(
            "{mode} {sieve} {policy} {extra:?} cap {cap}: serve {got:?} sim {want:?}"
        ));
        // Write-back departs from the simulator in two ways the thesis' design implies: a
        // write never overwrites a cache block in place (4.1, no-overwrite), so a write hit
        // in a full cache takes a fresh block before its old version is released, which
        // evicts one clean block; and a dirty block cannot be evicted until the flusher has
        // written it, so when the simulator's LRU victim is dirty the real cache evicts the
        // next clean block. So write-back agrees to within 1 % of each counter (seen: 4 read
        // hits of 4,359 and 6 allocation-writes of 1,356); every other write policy exactly.
        // Ordered write-back shares both departures (its closed-epoch versions are kept as
        // write-back flush keeps them), and the same tolerance.
        let close = |g: u64, w: u64| g.abs_diff(w) <= (w / 100).max(5);
        let agree = if mode.contains("write-back") {
            got.iter().zip(&want).all(|(&g, &w)| close(g, w))
        } else {
            got == want
        };
        if !agree {
            panic!("serve and sim disagree:\n{}", report.join("\n"));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert_ne!(report[3].split("serve").nth(1), report[4].split("serve").nth(1), "the flags act");
}

/// One agreement case: the write policy and sieve served, the sieve the simulator runs for
/// them, and the replacement policy with its parameters.
type Case<'a> = (&'a str, &'a str, &'a str, &'a str);

/// Each replacement policy of `through` under write-through and of `around` under
/// write-around (the simulator's WMNA sieve), all admitting every miss, on the skewed trace
/// (1-4 blocks a request) and on the same trace with every request cut to one block, gives
/// exactly the simulator's counters.
fn agree_exactly(through: &[&str], around: &[&str]) {
    let cases = through
        .iter()
        .map(|&p| ("write-through", "aod", "aod", p))
        .chain(around.iter().map(|&p| ("write-around", "aod", "wmna", p)))
        .collect::<Vec<_>>();
    agree_on(&cases, &cases);
}

/// The `multi` cases on the skewed trace (1-4 blocks a request) and the `single` cases on
/// the same trace with every request cut to one block give exactly the simulator's counters;
/// every case is served and reported before the first disagreement fails the test.
fn agree_on(multi: &[Case], single: &[Case]) {
    let dir = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    for (one_block, cases) in [(false, multi), (true, single)] {
        if cases.is_empty() {
            continue;
        }
        let trace = dir.path().join("skewed.csv");
        let mut reqs = skewed_trace(3000, 13);
        if one_block {
            for r in &mut reqs {
                r.3 = 4096;
            }
        }
        write_csv_trace(&trace, &reqs);
        for &(mode, sieve, sim_sieve, policy) in cases {
            let args = ["--write-policy", mode, "--admission", sieve, "--policy", policy];
            let (got, cap) = served(dir.path(), &trace, &args, &[]);
            let want = predicted(&trace, sim_sieve, policy, cap, &[]);
            assert!(got[0] > 100 && got[1] > 100, "{mode} {policy}: the trace must hit: {got:?}");
            let what = if one_block { "single-block" } else { "multi-block" };
            let verdict = if got == want { "" } else { "  DISAGREE" };
            report.push(format!(
                "{what} {mode} {policy} cap {cap}: serve {got:?} sim {want:?}{verdict}"
            ));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(
        report.iter().all(|r| !r.ends_with("DISAGREE")),
        "serve and sim disagree:\n{}",
        report.join("\n")
    );
}

/// The policies other than LRU and ARC: FIFO, CLOCK, SIEVE, S3-FIFO, 2Q and SLRU (the
/// paper's insertion and libCacheSim's) under write-through, FIFO and 2Q under write-around,
/// on the skewed trace (1-4 blocks a request) and on the same trace with every request cut
/// to one block, give exactly the simulator's counters. FIFO's and 2Q's first queue do not
/// move a block on a hit, so the victim of a request's miss can be a block the same request
/// has just hit and pinned; the real cache hands that block to the miss at once, as the
/// simulator does (`CacheState::allocate_within`). Before it did, the multi-block trace gave,
/// for FIFO write-through, serve [3854, 1510, 2068] against sim [3854, 1512, 2068] (two
/// allocations refused for want of a free block), for 2Q 4309 read hits against 4310, for
/// FIFO write-around 3824 against 3826.
#[test]
fn every_policy_agrees_on_multi_and_single_block_requests() {
    agree_exactly(
        &["fifo", "clock", "sieve", "s3fifo", "2q", "slru", "slru:4:lcs"],
        &["fifo", "2q"],
    );
}

/// LFU, LFU-DA (the paper's form and libCacheSim's) and LRU-K (K = 2 and 3), each with its
/// parameters spelled as `ember sim` spells them, give exactly the simulator's counters at
/// queue depth 1, under write-through and write-around, on multi-block and single-block
/// requests.
#[test]
fn frequency_and_lru_k_policies_agree_with_the_simulator() {
    agree_exactly(
        &["lfu", "lfuda", "lfuda:variant=lcs", "lruk", "lruk:k=3"],
        &["lfu", "lfuda", "lruk"],
    );
}

/// The randomized policies (Random, Hyperbolic, LeCaR, W-TinyLFU and CACHEUS in the paper's
/// form and libCacheSim's, LHD), each with its default seed and another, give
/// exactly the simulator's counters at queue depth 1 on multi-block and single-block
/// requests: the same seed makes the same decisions in the real cache, under write-through
/// and write-around. A victim drawn among the blocks a request has just allocated (likely
/// for a uniform draw) takes its room at once, as in the simulator
/// (`CacheState::allocate_within` with the request's own blocks); before it did, the real
/// cache refused the allocation (Random, write-through: serve [3850, 1536, 2046] read hits,
/// write hits, allocations against sim [3886, 1535, 2013]).
#[test]
fn seeded_policies_agree_with_the_simulator() {
    agree_exactly(
        &[
            "random",
            "random:seed=9",
            "hyperbolic",
            "hyperbolic:samples=8:seed=9",
            "lecar",
            "lecar:seed=9",
            "wtinylfu",
            "wtinylfu:window=10%:seed=9",
            "wtinylfu:lcs",
            "cacheus",
            "cacheus:seed=9",
            "cacheus:lcs",
            "lhd",
            "lhd:samples=8:seed=9",
        ],
        &["random", "hyperbolic", "lecar", "wtinylfu", "wtinylfu:lcs", "cacheus", "lhd"],
    );
}

/// LIRS (default and with a larger HIR share), CLOCK-Pro, MQ (the paper's order and
/// libCacheSim's) and CAR, each with its parameters spelled as `ember sim` spells them, give
/// exactly the simulator's counters at queue depth 1, under write-through and write-around,
/// on multi-block and single-block requests. LIRS's HIR queue of 1 % (2 blocks here),
/// CLOCK-Pro's cold pages and MQ's lowest queue can evict a block the same request has just
/// allocated; the real cache then gives its room to the miss at once, as the simulator does.
#[test]
fn recency_set_clock_pro_mq_and_car_policies_agree_with_the_simulator() {
    agree_exactly(
        &["lirs", "lirs:hir=10%", "clockpro", "mq", "mq:lifetime=100:variant=lcs", "car"],
        &["lirs", "clockpro:cold=25%", "mq", "car"],
    );
}

/// A trace for SieveStore-D with 4-second epochs: in each of 4 epochs a
/// hot set of 20 blocks (drifting by 5 an epoch) read 12 times each and 60 cold single
/// reads and writes, all between 0.5 s and 2 s into the epoch (one request at 0 s starts the
/// clock). The 2 s before the next epoch's first request cover a replayer running late under
/// load (a request due at 2 s that runs after 4 s would count in the wrong epoch) and the
/// batch moves at each epoch's end.
fn epoch_trace(path: &std::path::Path) {
    let mut rng = Rng::new(7);
    let mut rows = vec![(0u64, false, 999u64)];
    for e in 0..4u64 {
        let mut reqs: Vec<(bool, u64)> = Vec::new();
        for h in 0..20u64 {
            for _ in 0..12 {
                reqs.push((false, e * 5 + h));
            }
        }
        for _ in 0..60 {
            reqs.push((rng.below(4) == 0, 100 + rng.below(900)));
        }
        rng.shuffle(&mut reqs);
        let n = reqs.len() as u64;
        for (i, (w, b)) in reqs.into_iter().enumerate() {
            let t = e * 4_000_000_000 + 500_000_000 + i as u64 * 1_500_000_000 / n;
            rows.push((t, w, b));
        }
    }
    let mut f = String::new();
    for (t, w, b) in rows {
        f.push_str(&format!("{t},disk,{},{},4096\n", if w { "w" } else { "r" }, b * 4096));
    }
    std::fs::write(path, f).unwrap();
}

/// SieveStore-D live: replayed at the trace's timing through `ember serve
/// --admission sievestore-d --epoch 4s`, the real cache's batch allocation gives the read
/// hits, write hits and allocation-writes (moves) of `ember sievestore` with the same epoch.
/// Exact, because the trace leaves 2 s between an epoch's last request and the next
/// epoch's first (seen on a loaded machine with 0.3 s: 1,226 hits against 1,260, the
/// replayer late by more than the margin).
#[test]
fn sievestore_d_batches_live_give_the_simulators_counters() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("epochs.csv");
    epoch_trace(&trace);
    let flags: &[&str] = &["--epoch", "4s", "--sieve-threshold", "10"];
    let mut args = vec!["--admission", "sievestore-d", "--write-policy", "write-through"];
    args.extend_from_slice(flags);
    let (got, cap) = served(dir.path(), &trace, &args, &["--timing", "trace"]);
    let want = predicted(&trace, "sievestore-d", "lru", cap, flags);
    eprintln!("serve {got:?} sim {want:?} (cap {cap})");
    // The hot set drifts by 5 blocks an epoch: each of the 3 epochs after the first finds
    // 15 of its 20 hot blocks moved in (12 reads each); 20 + 5 + 5 moves.
    assert!(want[0] >= 3 * 15 * 12 && want[2] >= 30, "{want:?}");
    assert_eq!(got, want, "read hits, write hits, allocation-writes");
}

/// Real block traces are full of 512-byte and unaligned requests. The rule
/// both sides follow: a request touching part of a block is one access to that block, like
/// a whole-block one (a read miss fills the whole block; a write to a cached block updates
/// it and a write miss the sieve admits allocates it, read-modify-write, under every write
/// policy). A trace of 512-byte-aligned requests of 512 B to 8 KiB, most not 4 KiB aligned,
/// gives the simulator's counters exactly (write-back within 1 %, as above).
#[test]
fn sub_block_requests_give_the_simulators_counters() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("sectors.csv");
    let mut rng = Rng::new(29);
    let reqs: Vec<Req> = (0..3000)
        .map(|_| {
            let hot = rng.below(10) < 8;
            let sector = if hot { rng.below(128 * 8) } else { rng.below(1000 * 8) };
            let len = 512 * (1 + rng.below(16));
            ("disk".to_string(), rng.below(10) < 3, sector * 512, len as u32)
        })
        .collect();
    let unaligned = reqs.iter().filter(|r| r.2 % 4096 != 0 || r.3 % 4096 != 0).count();
    assert!(unaligned > 2500, "{unaligned}");
    write_csv_trace(&trace, &reqs);
    let cases: [(&str, &str, &str); 9] = [
        ("write-through", "aod", "aod"),
        ("write-through", "wmna", "wmna"),
        ("write-through", "sievestore-c", "sievestore-c"),
        ("write-around", "aod", "wmna"),
        ("write-back-flush", "aod", "aod"),
        ("write-back-persist", "aod", "aod"),
        ("write-back-persist", "wmna", "wmna"),
        ("ordered-write-back", "aod", "aod"),
        ("ordered-write-back", "wmna", "wmna"),
    ];
    let low: &[&str] = &["--sieve-t1", "2", "--sieve-t2", "1"];
    let mut report = Vec::new();
    for (mode, sieve, sim_sieve) in cases {
        let extra: &[&str] = if sieve == "sievestore-c" { low } else { &[] };
        let mut args = vec!["--write-policy", mode, "--admission", sieve];
        args.extend_from_slice(extra);
        let (got, cap) = served(dir.path(), &trace, &args, &[]);
        let want = predicted(&trace, sim_sieve, "lru", cap, extra);
        report.push(format!("{mode} {sieve}: serve {got:?} sim {want:?}"));
        let close = |g: u64, w: u64| g.abs_diff(w) <= (w / 100).max(5);
        let agree = if mode.contains("write-back") {
            got.iter().zip(&want).all(|(&g, &w)| close(g, w))
        } else {
            got == want
        };
        assert!(agree, "serve and sim disagree:\n{}", report.join("\n"));
    }
    eprintln!("{}", report.join("\n"));
}

/// A hot set under scans: 80 % of the requests on 64 hot blocks (1-2 blocks, 30 % writes),
/// the others continuing one of two sequential scans of 1-4 block requests (one reading, one
/// writing) through the volume's other blocks, interleaved with the hot requests and with
/// each other.
fn scan_trace(n: usize, seed: u64) -> Vec<Req> {
    let mut rng = Rng::new(seed);
    let (mut read_at, mut write_at) = (100u64, 600u64);
    (0..n)
        .map(|_| {
            if rng.below(10) < 8 {
                let block = rng.below(64);
                let len = 1 + rng.below(2);
                return ("disk".to_string(), rng.below(10) < 3, block * 4096, (len * 4096) as u32);
            }
            let write = rng.below(2) == 0;
            let at = if write { &mut write_at } else { &mut read_at };
            let len = 1 + rng.below(4);
            if *at + len > 1024 {
                *at = 100;
            }
            let block = *at;
            *at += len;
            ("disk".to_string(), write, block * 4096, (len * 4096) as u32)
        })
        .collect()
}

/// The sequential cutoff decides the same in `ember sim --seq-cutoff` and in `ember serve
/// --seq-cutoff` at queue depth 1: on a trace with scans through a cache smaller than the
/// volume, the read hits, write hits, allocation-writes and the cutoff's bypasses are equal,
/// under the `always` and `full` policies and with the read and write thresholds apart.
#[test]
fn the_sequential_cutoff_agrees_with_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("scans.csv");
    write_csv_trace(&trace, &scan_trace(4000, 41));
    let cases: [&[&str]; 4] = [
        &["--seq-cutoff", "64K", "--seq-cutoff-policy", "always"],
        &["--seq-cutoff", "64K"],
        &[
            "--seq-cutoff-read",
            "32K",
            "--seq-cutoff-write",
            "128K",
            "--seq-cutoff-policy",
            "always",
        ],
        &["--seq-cutoff", "64K", "--seq-cutoff-policy", "never"],
    ];
    let mut report = Vec::new();
    for cut in cases {
        let mut args = vec!["--write-policy", "write-through", "--admission", "aod"];
        args.extend_from_slice(cut);
        let (got, cap, bypasses) = served_sized(dir.path(), &trace, "5M", &args, &[]);
        let json = dir.path().join("sim.json");
        run(
            Command::new(ember())
                .args(["sim"])
                .arg(&trace)
                .args(["--format", "csv", "--policy", "lru", "--size", &cap.to_string()])
                .arg("--json")
                .arg(&json)
                .arg("-q")
                .args(cut),
            Duration::from_secs(60),
        );
        let out = std::fs::read_to_string(&json).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let r = &v["runs"][0];
        let want = ["read_hits", "write_hits", "allocation_writes"].map(|k| r[k].as_u64().unwrap());
        let want_bypasses = r["seq_cutoff_bypasses"].as_u64().unwrap_or(0);
        report.push(format!(
            "{cut:?} cap {cap}: serve {got:?} bypasses {bypasses}, sim {want:?} bypasses \
             {want_bypasses}"
        ));
        assert!(
            got == want && bypasses == want_bypasses,
            "serve and sim disagree:\n{}",
            report.join("\n")
        );
        if cut.contains(&"never") {
            assert_eq!(bypasses, 0);
        } else {
            assert!(bypasses > 100, "the scans are cut: {}", report.join("\n"));
        }
    }
    eprintln!("{}", report.join("\n"));
}

/// Two volumes on one cache: `hot`, 80 % of the requests on 96 blocks (1-2 blocks, 30 %
/// writes), and `scan`, sequential 1-4 block requests through 1000 blocks (a third of them
/// writes). The first request is `hot`'s, so both the server and the simulator number `hot`
/// 0 and `scan` 1.
fn two_volume_trace(n: usize, seed: u64) -> Vec<Req> {
    let mut rng = Rng::new(seed);
    let mut at = 0u64;
    (0..n)
        .map(|i| {
            if i == 0 || rng.below(10) < 6 {
                let block = rng.below(96);
                let len = 1 + rng.below(2);
                return ("hot".to_string(), rng.below(10) < 3, block * 4096, (len * 4096) as u32);
            }
            let len = 1 + rng.below(4);
            if at + len > 1000 {
                at = 0;
            }
            let block = at;
            at += len;
            ("scan".to_string(), rng.below(3) == 0, block * 4096, (len * 4096) as u32)
        })
        .collect()
}

/// Per-volume settings decide the same in `ember sim --config` and in `ember serve --config`
/// at queue depth 1: `hot` under write-through with a min share, `scan` under write-around
/// with a max share and a sequential cutoff of its own; the read hits, write hits and
/// allocation-writes are equal, under LRU and under policies that walk their own order
/// past the blocks the shares protect (CLOCK's hand, 2Q's two queues).
#[test]
fn per_volume_settings_and_shares_agree_with_the_simulator() {
    for policy in ["lru", "clock", "2q"] {
        per_volume_settings_agree_under(policy);
    }
}

fn per_volume_settings_agree_under(policy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("two.csv");
    write_csv_trace(&trace, &two_volume_trace(3000, 43));
    for name in ["hot", "scan"] {
        sparse_file(&dir.path().join(format!("{name}.img")), 4 << 20);
    }
    let config = dir.path().join("two.toml");
    let text = format!(
        "[cache]\ndevice = \"{d}/cache.img\"\nsize = \"5M\"\nformat-if-needed = true\n\n\
         [live]\nwrite-policy = \"write-through\"\npolicy = \"{policy}\"\nadmission = \"aod\"\n\n\
         [[volume]]\nname = \"hot\"\nbacking = \"{d}/hot.img\"\nmin-share = \"50%\"\n\n\
         [[volume]]\nname = \"scan\"\nbacking = \"{d}/scan.img\"\nwrite-policy = \"write-around\"\n\
         max-share = \"20%\"\nseq-cutoff = {{ policy = \"always\", read = \"64K\" }}\n",
        d = dir.path().display()
    );
    std::fs::write(&config, text).unwrap();
    let serve = Serve::start(&["--config", config.to_str().unwrap()]);
    let server = format!("nbd://{}", serve.nbd);
    let r = replay_json(&[
        trace.to_str().unwrap(),
        "--format",
        "csv",
        "--server",
        &server,
        "--queue-depth",
        "1",
        "--connections",
        "1",
    ]);
    assert_eq!(r["verification"]["reads_failed"], 0, "{r:#}");
    let s = scrape(&serve.metrics);
    let got = [
        metric(&s, "ember_cache_read_hits_total") as u64,
        metric(&s, "ember_cache_write_hits_total") as u64,
        metric(&s, "ember_cache_allocation_writes_total") as u64,
        metric(&s, "ember_cache_seq_cutoff_bypasses_total") as u64,
    ];
    let cap = metric(&s, "ember_cache_capacity_blocks") as u64;
    serve.stop();
    let json = dir.path().join("sim.json");
    run(
        Command::new(ember())
            .args(["sim"])
            .arg(&trace)
            .args(["--format", "csv", "--config", config.to_str().unwrap()])
            .args(["--size", &cap.to_string(), "--json", json.to_str().unwrap(), "-q"]),
        Duration::from_secs(60),
    );
    let out = std::fs::read_to_string(&json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let r = &v["runs"][0];
    let want = ["read_hits", "write_hits", "allocation_writes", "seq_cutoff_bypasses"]
        .map(|k| r[k].as_u64().unwrap());
    assert_eq!(got, want, "{policy}: serve against sim (cap {cap})");
    assert!(want[3] > 0, "{policy}: scan's cutoff cut: {want:?}");
}
