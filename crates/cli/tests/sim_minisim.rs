//! `ember sim --minisim RATE`: miniature simulations (MINISIM) against the exact sweep of
//! `ember sim` at the same sizes. At rate 1 the runs are the exact ones; at 1 % of the blocks
//! of a Zipf trace of 10 million requests the miss ratios of LRU, ARC and S3-FIFO are
//! within a point of the exact ones, and a smaller trace at 10 % within two points. The
//! 10-million-request check prints its cost against the exact sweep with
//! `cargo test --release -p ember-cli --test sim_minisim -- --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ember_testkit::{ember, ember_ok, ember_run};

/// `(policy, size) -> miss ratio` of `ember sim` on `trace` with extra `args`, and the
/// seconds and peak resident kilobytes the run took (from `/usr/bin/time`, when present).
fn miss_ratios(trace: &Path, args: &[&str]) -> (Vec<(String, String, f64)>, f64, Option<u64>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("sim.json");
    let mut all = vec!["sim", trace.to_str().expect("path"), "--json", json.to_str().expect("p")];
    all.push("--quiet");
    all.extend_from_slice(args);
    let started = Instant::now();
    let timer = Path::new("/usr/bin/time");
    let o = if timer.exists() {
        Command::new(timer)
            .args(["-f", "maxrss_kb=%M"])
            .arg(ember())
            .args(&all)
            .output()
            .expect("run ember under time")
    } else {
        Command::new(ember()).args(&all).output().expect("run ember")
    };
    let secs = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "ember {all:?}: {stderr}");
    let rss = stderr.lines().find_map(|l| l.strip_prefix("maxrss_kb=")?.trim().parse().ok());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let rows = v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            let misses = r["misses"].as_f64().expect("misses");
            let accesses = r["block_accesses"].as_f64().expect("accesses");
            (
                r["policy"].as_str().expect("policy").to_string(),
                r["size"].as_str().expect("size").to_string(),
                misses / accesses.max(1.0),
            )
        })
        .collect();
    (rows, secs, rss)
}

fn zipf(dir: &Path, requests: u64, blocks: u64) -> PathBuf {
    let path = dir.join("zipf.oracleGeneral.bin");
    let (r, b) = (requests.to_string(), blocks.to_string());
    ember_ok(
        &["trace", "gen", "zipf", "--alpha", "0.8", "--blocks", &b, "--requests", &r]
            .into_iter()
            .chain(["--seed", "5", "-o", path.to_str().expect("path")])
            .collect::<Vec<_>>(),
    );
    path
}

const GRID: [&str; 4] = ["--policy", "lru,arc,s3fifo", "--size", "0.5%,1%,5%,10%,25%"];

/// The largest difference between the estimated and the exact miss ratios, checked cell by
/// cell in the same order.
fn worst(exact: &[(String, String, f64)], mini: &[(String, String, f64)]) -> f64 {
    assert_eq!(exact.len(), 15);
    assert_eq!(exact.len(), mini.len());
    let mut worst = 0f64;
    for (e, m) in exact.iter().zip(mini) {
        assert_eq!((&e.0, &e.1), (&m.0, &m.1));
        println!("{:>7} {:>5}: exact {:.4}, minisim {:.4}", e.0, e.1, e.2, m.2);
        worst = worst.max((e.2 - m.2).abs());
    }
    worst
}

#[test]
fn minisim_at_rate_one_is_the_exact_sweep() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = zipf(dir.path(), 100_000, 20_000);
    let (exact, _, _) = miss_ratios(&trace, &GRID);
    let (mini, _, _) = miss_ratios(&trace, &[&GRID[..], &["--minisim", "100%"]].concat());
    assert_eq!(worst(&exact, &mini), 0.0);
    // A bad rate and a timeline are refused.
    for bad in
        [&["--minisim", "0"][..], &["--minisim", "150%"], &["--minisim", "1%", "--interval", "1h"]]
    {
        let mut a = vec!["sim", trace.to_str().expect("path"), "--quiet"];
        a.extend_from_slice(bad);
        assert!(!ember_run(&a).success(), "{bad:?} was accepted");
    }
}

/// The smaller version of the check, for `make test`: 2 million requests over 500,000
/// blocks at 10 % sampling, within two points (a Zipf trace's most popular block alone
/// takes 1.5 % of its accesses, so whether it falls in the sample moves a small sample's
/// estimate; at 1 % the smallest miniature caches would hold only 25 blocks).
#[test]
fn minisim_at_ten_percent_is_within_a_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = zipf(dir.path(), 2_000_000, 500_000);
    let (exact, _, _) = miss_ratios(&trace, &GRID);
    let (mini, _, _) = miss_ratios(&trace, &[&GRID[..], &["--minisim", "10%"]].concat());
    let w = worst(&exact, &mini);
    assert!(w <= 0.02, "worst difference {w}");
}

/// The full check: 10 million requests over 2 million blocks, within a point at 1 %
/// sampling (the smallest sizes, whose miniatures would hold 75 to 150 blocks, run at a
/// raised rate: see `ember_sim::core::minisim::MIN_MINI_BLOCKS`), and the cost of both
/// against each other. About 15 s on two cores, most of it the exact sweep.
#[test]
fn minisim_on_ten_million_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = zipf(dir.path(), 10_000_000, 2_000_000);
    let (exact, t_exact, m_exact) = miss_ratios(&trace, &GRID);
    let (mini, t_mini, m_mini) = miss_ratios(&trace, &[&GRID[..], &["--minisim", "1%"]].concat());
    let w = worst(&exact, &mini);
    println!("worst difference: {w:.4} (limit 0.01)");
    println!("exact sweep: {t_exact:.2} s, peak RSS {m_exact:?} KiB");
    println!("minisim 1%:  {t_mini:.2} s, peak RSS {m_mini:?} KiB");
    println!("ratio: {:.2}", t_exact / t_mini.max(1e-9));
    assert!(w <= 0.01, "worst difference {w}");
}
